"""fusionbench: the Python client of a FusionBench server.

    import fusionbench as fb
    c = fb.Client()                          # $FUSIONBENCH_URL, $FUSIONBENCH_TOKEN, else the
                                             # CLI's saved login, else http://127.0.0.1:8080
    m = c.upload_model("mine", model, (x,))  # exported here (a dynamic batch where it can be),
                                             # uploaded, and waited for until a worker has read
                                             # it (m.info); or a path to a .pt2
    m = c.upload_model("mine2", "mine.pt2", inputs={"x": x})   # with your own inputs
    job = m.submit(explain=True).wait()      # or c.submit("resnet50", engine="inductor")
    job.speedup                              # {"inductor": 1.31, ...} against the baseline
    job.table()                              # one row per variant: dicts, or a pandas frame

Only the standard library's HTTP: no torch is needed to query; torch only to
export a module in upload_model.  Every refusal of the server is an ApiError
carrying the API's status, code, field and message (docs/API.md)."""

import hashlib
import http.client
import json
import os
import shutil
import socket
import struct
import tempfile
import time
import urllib.parse
import zipfile

__all__ = ["ApiError", "Client", "Job", "Model"]

DEFAULT_URL = "http://127.0.0.1:8080"
PIECE = 1 << 20  # bytes read from a file per send
CONTINUE_WAIT = 5.0  # seconds an upload waits for 100 Continue before sending anyway
HEAD_MAX = 1 << 16  # the most bytes of an answer's head read before sending a body


class ApiError(Exception):
    """The server refused or failed: status (HTTP), code (docs/API.md), field
    (the request's part at fault, or None) and message."""

    def __init__(self, status, code, message, field=None):
        super().__init__("%s %s: %s%s" % (status, code, message,
                                            " (%s)" % field if field else ""))
        self.status, self.code, self.message, self.field = status, code, message, field


def _saved_login():
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    try:
        with open(os.path.join(base, "fusionbench", "config.json")) as f:
            cfg = json.load(f)
        return cfg.get("url"), cfg.get("token")
    except (OSError, ValueError):
        return None, None


class Client:
    """A server and who asks it.  url and token default as the CLI's do."""

    def __init__(self, url=None, token=None, timeout=60):
        saved_url, saved_token = _saved_login()
        self.url = (url or os.environ.get("FUSIONBENCH_URL") or saved_url
                    or DEFAULT_URL).rstrip("/")
        if token is None:
            token = os.environ.get("FUSIONBENCH_TOKEN") or (
                saved_token if saved_url and saved_url.rstrip("/") == self.url else None)
        self.token = token
        self.timeout = timeout
        p = urllib.parse.urlsplit(self.url)
        if p.scheme not in ("http", "https") or not p.hostname:
            raise ValueError("not a server URL: %r" % self.url)
        self._p = p

    # ---- HTTP ----

    def _conn(self, timeout=None):
        https = self._p.scheme == "https"
        cls = http.client.HTTPSConnection if https else http.client.HTTPConnection
        return cls(self._p.hostname, self._p.port, timeout=timeout or self.timeout)

    def _headers(self, extra=None):
        h = {"Accept": "application/json", "X-FusionBench-Client": "python",
             "User-Agent": "fusionbench-python/0.1"}
        if self.token:
            h["Authorization"] = "Bearer " + self.token
        h.update(extra or {})
        return h

    @staticmethod
    def _answer(r):
        return Client._doc(r.status, r.read())

    @staticmethod
    def _doc(status, body):
        try:
            doc = json.loads(body) if body else None
        except ValueError:
            doc = None
        if status >= 400:
            err = (doc or {}).get("error") or {} if isinstance(doc, dict) else {}
            raise ApiError(status, err.get("code", "http_%d" % status),
                           err.get("message", body[:300].decode("utf-8", "replace")),
                           err.get("field"))
        return doc

    @staticmethod
    def _early_answer(c):
        """After an upload's headers, sent with Expect: 100-continue: None to send
        the body (100 Continue came, or no word within CONTINUE_WAIT: RFC 9110
        10.1.1), else the server's (status, body), its answer to the headers
        alone (a quota, a taken name): the body is then never sent."""
        sock = c.sock
        keep = sock.gettimeout()
        sock.settimeout(CONTINUE_WAIT)  # a timeout on recv, not select: TLS has records
        try:                            # of its own (session tickets) before any answer
            head = sock.recv(1)
        except socket.timeout:
            return None
        finally:
            sock.settimeout(keep)
        while b"\r\n\r\n" not in head:  # byte by byte: nothing past the head is taken
            b = sock.recv(1)
            if not b or len(head) >= HEAD_MAX:
                raise ApiError(502, "bad_gateway", "the server's answer to an upload's headers "
                               "ended early or ran past %d bytes" % HEAD_MAX)
            head += b
        lines = head.decode("latin-1").split("\r\n")
        try:
            status = int(lines[0].split()[1])
        except (IndexError, ValueError):
            raise ApiError(502, "bad_gateway", "not an HTTP status line: %r" % lines[0][:80])
        if status == 100:
            return None
        length = 0
        for line in lines[1:]:
            k, _, v = line.partition(":")
            if k.strip().lower() == "content-length" and v.strip().isdigit():
                length = int(v.strip())
        body = b""
        while len(body) < min(length, HEAD_MAX):
            b = sock.recv(min(length, HEAD_MAX) - len(body))
            if not b:
                break
            body += b
        return status, body

    def request(self, method, path, body=None, query=None):
        """One API call; the answer's JSON (None when empty).  ApiError on 4xx/5xx."""
        if query:
            path += "?" + urllib.parse.urlencode({k: v for k, v in query.items() if v is not None})
        data = None if body is None else json.dumps(body).encode()
        extra = {"Content-Type": "application/json"} if data is not None else {}
        c = self._conn()
        try:
            c.request(method, self._p.path.rstrip("/") + path, body=data,
                      headers=self._headers(extra))
            return self._answer(c.getresponse())
        finally:
            c.close()

    # ---- models ----

    def upload_model(self, name, model, example_inputs=None, visibility="private",
                     progress=None, inputs=None, dynamic_batch=True, wait=True, timeout=600):
        """Uploads a model's archive as your model `name` and returns its Model.

        model: a path to a .pt2 (torch.export.save), or an nn.Module exported
        here with example_inputs (a tuple; needs torch), its first dimension
        dynamic when dynamic_batch and the program allows it (then jobs may
        take any batch size).  inputs: the inputs jobs run on instead of
        seeded random ones, a {input name: tensor} dict or a path to a
        .safetensors file of them (named as the export names its inputs: a
        forward(self, x) takes "x"); put into the archive as
        extra/inputs.safetensors.  progress(sent, total) is called as the
        bytes go.  wait: returns once a worker has read the model (ready, or
        ApiError "invalid_model" with why); else at once, still preparing."""
        tmp = tempfile.mkdtemp(prefix="fusionbench-")
        try:
            path = os.path.join(tmp, "model.pt2")
            if isinstance(model, (str, os.PathLike)):
                if inputs is None:
                    path = os.fspath(model)
                else:
                    shutil.copyfile(os.fspath(model), path)
            else:
                if example_inputs is None:
                    raise ValueError("exporting a module needs example_inputs (a tuple of tensors)")
                _export(model, tuple(example_inputs), dynamic_batch, path)
            if inputs is not None:
                _add_inputs(path, inputs)
            m = self._upload_file(name, path, visibility, progress)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return m.wait_ready(timeout) if wait else m

    def _upload_file(self, name, path, visibility, progress):
        size = os.path.getsize(path)
        q = urllib.parse.urlencode({"name": name, "visibility": visibility})
        c = self._conn(timeout=max(self.timeout, 600))
        digest = hashlib.sha256()
        try:
            c.putrequest("POST", self._p.path.rstrip("/") + "/api/v1/models?" + q)
            for k, v in self._headers({"Content-Type": "application/octet-stream",
                                       "Content-Length": str(size),
                                       "Expect": "100-continue"}).items():
                c.putheader(k, v)
            c.endheaders()
            early = self._early_answer(c)
            if early:  # refused from the headers: not a byte of the body sent
                self._doc(*early)
                raise ApiError(early[0], "http_%d" % early[0], "answered before the body")
            sent = 0
            with open(path, "rb") as f:
                while True:
                    b = f.read(PIECE)
                    if not b:
                        break
                    digest.update(b)
                    try:
                        c.send(b)
                    except (BrokenPipeError, ConnectionResetError):
                        break  # refused mid-body: the answer says why
                    sent += len(b)
                    if progress:
                        progress(sent, size)
            doc = self._answer(c.getresponse())
        finally:
            c.close()
        if doc.get("sha256") != digest.hexdigest():
            raise ApiError(500, "digest_mismatch", "the server stored %s, the file is %s" % (
                doc.get("sha256"), digest.hexdigest()))
        return Model(self, doc)

    def models(self):
        """The models you may use: yours and the lab's (Model objects, newest first)."""
        return [Model(self, m) for m in self.request("GET", "/api/v1/models")["items"]]

    def model(self, model_id):
        return Model(self, self.request("GET", "/api/v1/models/%d" % int(model_id)))

    def download_model(self, model_id, path):
        """Writes a model's archive to path (not overwriting a file); checks its SHA-256."""
        want = self.model(model_id).sha256
        c = self._conn(timeout=max(self.timeout, 600))
        digest = hashlib.sha256()
        try:
            c.request("GET", self._p.path.rstrip("/") + "/api/v1/models/%d/archive" % int(model_id),
                      headers=self._headers())
            r = c.getresponse()
            if r.status != 200:
                self._answer(r)
            with open(path, "xb") as f:
                while True:
                    b = r.read(PIECE)
                    if not b:
                        break
                    digest.update(b)
                    f.write(b)
        finally:
            c.close()
        if digest.hexdigest() != want:
            os.unlink(path)
            raise ApiError(500, "digest_mismatch", "downloaded %s, the model is %s" % (
                digest.hexdigest(), want))
        return path

    def delete_model(self, model_id):
        self.request("DELETE", "/api/v1/models/%d" % int(model_id))

    # ---- jobs ----

    def submit(self, workload, **spec):
        """Queues a job (the fields of docs/API.md's job spec as keywords) and
        returns its Job."""
        body = dict(spec, workload=workload)
        return Job(self, self.request("POST", "/api/v1/jobs", body))

    def job(self, job_id):
        return Job(self, self.request("GET", "/api/v1/jobs/%d" % int(job_id)))


def _export(model, args, dynamic_batch, path):
    """torch.export of model on args saved to path; the first dimension of
    every input dynamic when dynamic_batch and the program allows it."""
    import torch  # only here: querying needs no torch

    model = model.eval()
    ep = None
    if dynamic_batch and args and all(getattr(a, "dim", lambda: 0)() >= 1 for a in args):
        batch = torch.export.Dim("batch", min=1, max=4096)
        try:
            ep = torch.export.export(model, args, dynamic_shapes=tuple({0: batch} for _ in args))
        except Exception:  # the program fixes its batch: exported as it is
            ep = None
    if ep is None:
        ep = torch.export.export(model, args)
    torch.export.save(ep, path)


_ST = {"float64": "F64", "float32": "F32", "float16": "F16", "bfloat16": "BF16",
       "int64": "I64", "int32": "I32", "int16": "I16", "int8": "I8", "uint8": "U8",
       "bool": "BOOL"}


def _safetensors(tensors):
    """The bytes of a safetensors file of {name: tensor}."""
    head, blobs, off = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().cpu().contiguous()
        dt = str(t.dtype).replace("torch.", "")
        if dt not in _ST:
            raise ValueError("input %s is %s; inputs may be %s" % (name, dt, ", ".join(_ST)))
        b = t.view(-1).view(dtype=__import__("torch").uint8).numpy().tobytes() \
            if t.numel() else b""
        head[name] = {"dtype": _ST[dt], "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(head, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


def _add_inputs(path, inputs):
    """Puts inputs (a dict of tensors, or a .safetensors file's path) into the
    archive at path as <root>/extra/inputs.safetensors."""
    if isinstance(inputs, (str, os.PathLike)):
        with open(inputs, "rb") as f:
            data = f.read()
    elif isinstance(inputs, dict):
        data = _safetensors(inputs)
    else:
        raise ValueError("inputs: a {name: tensor} dict or a .safetensors path")
    with zipfile.ZipFile(path, "a", zipfile.ZIP_STORED) as z:
        root = z.namelist()[0].split("/", 1)[0]
        if root + "/extra/inputs.safetensors" in z.namelist():
            raise ValueError("the archive has inputs already")
        z.writestr(root + "/extra/inputs.safetensors", data)


class Model:
    """A model as the server has it: its fields as attributes (id, name,
    owner, visibility, status, error, size, sha256, info, ...) and as .raw."""

    def __init__(self, client, raw):
        self.client, self.raw = client, raw

    def __getattr__(self, key):
        try:
            return self.__dict__["raw"][key]
        except KeyError:
            raise AttributeError(key) from None

    def refresh(self):
        self.raw = self.client.request("GET", "/api/v1/models/%d" % self.raw["id"])
        return self

    def wait_ready(self, timeout=600, poll=1.0):
        """Waits while the model is preparing; returns it ready, or raises
        ApiError("invalid") with the reason, or TimeoutError."""
        end = time.monotonic() + timeout
        while self.refresh().status == "preparing":
            if time.monotonic() > end:
                raise TimeoutError("model %s still preparing after %s s" % (self.name, timeout))
            time.sleep(poll)
        if self.status == "invalid":
            raise ApiError(422, "invalid_model", self.error or "the model is invalid")
        return self

    def submit(self, **spec):
        """Submits a job of this model (workload model.ID; the inductor engine
        by default, engine="native" for the native engine): spec as for
        Client.submit.  Returns the Job."""
        spec.setdefault("engine", "inductor")
        return self.client.submit("model.%d" % self.raw["id"], **spec)

    def delete(self):
        self.client.delete_model(self.raw["id"])

    def __repr__(self):
        return "<Model %s %s %s>" % (self.raw.get("id"), self.raw.get("name"),
                                     self.raw.get("status"))


TERMINAL = ("succeeded", "failed", "canceled")


class Job:
    """A job: .state, .result, .speedup, .explanation, .table(); wait() follows it."""

    def __init__(self, client, raw):
        self.client, self.raw = client, raw

    @property
    def id(self):
        return self.raw["id"]

    @property
    def state(self):
        return self.raw["state"]

    @property
    def result(self):
        return self.raw.get("result")

    @property
    def error(self):
        return self.raw.get("error")

    def refresh(self):
        self.raw = self.client.request("GET", "/api/v1/jobs/%d" % self.id)
        return self

    def wait(self, timeout=3600, poll=1.0):
        """Follows the job to its end; returns it (failed jobs included: see .error)."""
        end = time.monotonic() + timeout
        while self.refresh().state not in TERMINAL:
            if time.monotonic() > end:
                raise TimeoutError("job %d still %s after %s s" % (self.id, self.state, timeout))
            time.sleep(poll)
        return self

    @property
    def speedup(self):
        """{variant: speedup over the baseline} (empty before a result)."""
        return dict(((self.result or {}).get("comparison") or {}).get("speedup") or {})

    @property
    def explanation(self):
        """The job's explanation (GET /api/v1/jobs/{id}/explain), or None."""
        try:
            doc = self.client.request("GET", "/api/v1/jobs/%d/explain" % self.id)
        except ApiError as e:
            if e.status == 404:
                return None
            raise
        return doc.get("explain", doc) if isinstance(doc, dict) else doc

    def table(self):
        """One row per variant: name, status, median and p90 ms, kernels, fused
        kernels, peak memory, speedup and its interval, verdict.  A pandas
        DataFrame when pandas is installed, else a list of dicts."""
        res = self.result or {}
        cmp_ = res.get("comparison") or {}
        rows = []
        for v in res.get("variants", []):
            lat = v.get("latency_ms") or {}
            n = v["name"]
            rows.append({"variant": n, "status": v.get("status"), "median_ms": lat.get("median"),
                         "p90_ms": lat.get("p90"), "kernels": v.get("kernels"),
                         "fused_kernels": v.get("fused_kernels"),
                         "peak_mem_bytes": v.get("peak_mem_bytes"),
                         "speedup": (cmp_.get("speedup") or {}).get(n),
                         "speedup_ci95": (cmp_.get("speedup_ci95") or {}).get(n),
                         "change": (cmp_.get("change") or {}).get(n)})
        try:
            import pandas
        except ImportError:
            return rows
        return pandas.DataFrame(rows)

    def __repr__(self):
        return "<Job %s %s>" % (self.raw.get("id"), self.raw.get("state"))
