// The outbox console's one script: asks before a form with `data-confirm` changes
// anything. Everything works without it (the server checks every action).
"use strict";
document.addEventListener("submit", (event) => {
  const form = event.target;
  const question = form.getAttribute("data-confirm");
  if (question && !window.confirm(question)) {
    event.preventDefault();
  }
});
