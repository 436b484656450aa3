// maiden inbox: reload the pending list every 15 seconds, unless the
// operator has started typing in one of its forms. Optional: without
// JavaScript the page has a Refresh link.
(function () {
  "use strict";
  var touched = false;
  document.addEventListener("input", function () { touched = true; });
  window.setInterval(function () {
    var el = document.activeElement;
    var typing = el && (el.tagName === "INPUT" || el.tagName === "TEXTAREA");
    if (!touched && !typing) {
      window.location.reload();
    }
  }, 15000);
})();
