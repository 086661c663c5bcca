// andon serve: the board refreshes itself. The server renders (and escapes) the fragment;
// this script only swaps it in. Served from the package: no inline script, no other host.
"use strict";
// the diff's two views are both in the page; a button shows one or the other
document.querySelectorAll("[data-toggle=diff]").forEach(function (button) {
  button.addEventListener("click", function () {
    const section = button.closest("section");
    if (section) section.classList.toggle("show-split");
  });
});
(function () {
  const box = document.querySelector("[data-live]");
  if (!box) return;
  const url = box.getAttribute("data-live");
  let last = null;
  // the server's ETag: 304 when the store has nothing new since the page (or the last
  // fragment) was made
  let mark = box.getAttribute("data-mark") || null;
  async function poll() {
    if (document.hidden) return;
    try {
      const headers = mark ? {"If-None-Match": mark} : {};
      const resp = await fetch(url, {credentials: "same-origin", cache: "no-store", headers});
      if (resp.status === 304 || !resp.ok) return;
      mark = resp.headers.get("ETag");
      const html = await resp.text();
      if (html !== last) {
        last = html;
        const doc = new DOMParser().parseFromString(html, "text/html");
        box.replaceChildren(...doc.body.childNodes);
        box.setAttribute("data-updated", String(Date.now()));
      }
    } catch (e) {
      box.setAttribute("data-error", String(e));
    }
  }
  setInterval(poll, 2000);
})();
