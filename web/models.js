// The Models page: the models people bring themselves (docs/API-EXTENSIONS.md,
// "Your own models"): an upload form with a progress bar, and the models the
// signed-in user may see.  Uses app.js's helpers (api, el, fillTable, ...).
"use strict";

// XMLHttpRequest, not fetch: only it reports an upload's progress.
function uploadModel(ev) {
  ev.preventDefault();
  const name = document.getElementById("mf-name").value.trim();
  const vis = document.getElementById("mf-visibility").value;
  const file = document.getElementById("mf-file").files[0];
  const bar = document.getElementById("mf-progress"), msg = document.getElementById("mf-message");
  if (!name || !file) { msg.textContent = "a name and a file, please"; return; }
  const xhr = new XMLHttpRequest();
  xhr.open("POST", API + "/models?name=" + encodeURIComponent(name) + "&visibility=" + encodeURIComponent(vis));
  xhr.setRequestHeader("Content-Type", "application/octet-stream");
  xhr.setRequestHeader("X-FusionBench-Client", "dashboard");
  if (apiToken()) xhr.setRequestHeader("Authorization", "Bearer " + apiToken());
  bar.hidden = false;
  bar.value = 0;
  msg.textContent = "uploading " + file.name + " (" + fmtBytes(file.size) + ")";
  xhr.upload.onprogress = (e) => { if (e.lengthComputable) bar.value = e.loaded / e.total; };
  xhr.onload = () => {
    let body = null;
    try { body = JSON.parse(xhr.responseText); } catch (e) { body = null; }
    if (xhr.status === 201 && body) {
      msg.textContent = "uploaded as model " + body.id + " (sha256 " + body.sha256.slice(0, 12) + "…): preparing";
      document.getElementById("model-form").reset();
      loadModels().catch((e) => setStatus(e.message, true));
    } else {
      const err = body && body.error ? body.error : { message: "HTTP " + xhr.status };
      msg.textContent = "upload failed: " + err.message + (err.field ? " (" + err.field + ")" : "");
    }
    bar.hidden = true;
  };
  xhr.onerror = () => { msg.textContent = "upload failed: the connection broke"; bar.hidden = true; };
  xhr.send(file);
}

async function deleteModel(m) {
  if (!confirm("Delete model " + m.name + " (" + m.id + ")?")) return;
  try {
    await api("/models/" + m.id, { method: "DELETE" });
    await loadModels();
  } catch (e) { setStatus("delete failed: " + e.message, true); }
}

function modelStatus(m) {
  const cell = el("td", {}, badge(m.status));
  if (m.error) cell.append(" ", el("span", { class: "muted" }, m.error));
  return cell;
}

async function loadModels() {
  const page = await api("/models");
  fillTable("models-table", page.items.map((m) => el("tr", {},
    el("td", { class: "num" }, String(m.id)), el("td", {}, el("code", {}, m.name)),
    el("td", {}, m.owner || "–"), el("td", {}, m.visibility), modelStatus(m),
    el("td", { class: "num" }, fmtBytes(m.size)),
    el("td", { title: m.sha256 }, el("code", {}, m.sha256.slice(0, 12) + "…")),
    el("td", {}, fmtTime(m.created_at)),
    el("td", {}, m.mine ? el("button", { type: "button", onclick: () => deleteModel(m) }, "Delete") : ""))));
}

window.fbViews = Object.assign(window.fbViews || {}, {
  models: { view: "models", load: loadModels },
});

document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("model-form").addEventListener("submit", uploadModel);
});
