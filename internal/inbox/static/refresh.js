// maiden inbox: reload the pending list every 15 seconds, unless the
// operator has started typing in one of its forms, or has moved the
// pointer, clicked, scrolled or pressed a key since the last tick. A
// reload while the operator aims at a button moved the list under the
// pointer (a request decided or expired since, another arrived), and the
// click landed on another request's Approve: the page reloads only after
// a whole quiet interval. Optional: without JavaScript the page has a
// Refresh link.
(function () {
  "use strict";
  var touched = false; // typed into a form: what was typed would be lost
  var active = false;  // since the last tick
  document.addEventListener("input", function () { touched = true; });
  ["pointermove", "pointerdown", "keydown", "wheel", "scroll", "touchstart", "focusin"].forEach(function (type) {
    document.addEventListener(type, function () { active = true; }, { capture: true, passive: true });
  });
  // due is one tick's decision (the browser test asks it directly).
  function due() {
    var el = document.activeElement;
    var typing = el && (el.tagName === "INPUT" || el.tagName === "TEXTAREA");
    var quiet = !active;
    active = false;
    return !touched && !typing && quiet;
  }
  window.maidenRefreshDue = due;
  window.setInterval(function () {
    if (due()) {
      window.location.reload();
    }
  }, 15000);
})();
