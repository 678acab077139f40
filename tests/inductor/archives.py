"""Archives made to do harm or simply wrong, from a good torch.export archive
(tests/inductor/test_pt2safe.py, tests/e2e/test_model_prepare.py).  Needs torch
for pickled_weight (run in the project venv's python):

    python archives.py OUTDIR MARKER    good.pt2 (usermodel.py),
                                        evil_weight.pt2 (loading it with
                                        torch.export.load runs `touch MARKER`)
                                        and lacking.pt2 (an operator the
                                        native engine lacks)
"""

import io
import json
import os
import sys
import zipfile


class _Cmd:
    """A pickle whose loading runs `touch path` (the attack)."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (os.system, ("touch %s" % self.path,))


def rewrite(src, dst, change):
    """Copies the zip src to dst with change(name, bytes) -> bytes or None
    (None: the entry is left out)."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
        for i in zin.infolist():
            data = change(i.filename, zin.read(i))
            if data is not None:
                zout.writestr(i.filename, data)


def edit_json(path_suffix, fn):
    def change(name, data):
        if name.endswith(path_suffix):
            obj = json.loads(data)
            fn(obj)
            return json.dumps(obj).encode()
        return data
    return change


def first(obj, pred):
    """The first dict in obj (depth first) for which pred holds."""
    stack = [obj]
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            if pred(x):
                return x
            stack.extend(x.values())
        elif isinstance(x, list):
            stack.extend(x)
    raise AssertionError("no such dict")


def pickled_weight(good, evil, marker):
    """evil: good with conv1.weight stored as a pickle whose loading runs
    `touch marker` (what torch.export.load would run)."""
    import torch

    buf = io.BytesIO()
    torch.save({"w": _Cmd(marker)}, buf, _use_new_zipfile_serialization=True)

    def to_pickle(cfg):
        meta = cfg["config"]["conv1.weight"]
        meta["use_pickle"] = True
        meta["path_name"] = "weight_evil"

    rewrite(good, evil, edit_json("model_weights_config.json", to_pickle))
    with zipfile.ZipFile(evil, "a") as z:
        root = z.namelist()[0].split("/")[0]
        z.writestr(root + "/data/weights/weight_evil", buf.getvalue())


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import usermodel

    out, mark = sys.argv[1], sys.argv[2]
    usermodel.export(os.path.join(out, "good.pt2"))
    pickled_weight(os.path.join(out, "good.pt2"), os.path.join(out, "evil_weight.pt2"), mark)
    usermodel.export_lacking(os.path.join(out, "lacking.pt2"))
