(function () {
  "use strict";
  var box = document.getElementById("q");
  var said = document.getElementById("qn");
  var units = document.querySelectorAll(".s");
  var texts = null;
  function run() {
    if (texts === null) {
      texts = [];
      for (var i = 0; i < units.length; i++) {
        texts.push(units[i].textContent.toLowerCase());
      }
    }
    var want = box.value.trim().toLowerCase();
    var shown = 0;
    for (var j = 0; j < units.length; j++) {
      var hit = want === "" || texts[j].indexOf(want) !== -1;
      units[j].classList.toggle("hide", !hit);
      if (hit) {
        shown++;
      }
    }
    said.textContent = want === "" ? "" : shown + " of " + units.length + " blocks match";
  }
  box.addEventListener("input", run);
  // A link ending in #search=WORDS opens the page filtered by WORDS.
  var asked = /^#search=(.*)$/.exec(window.location.hash);
  if (asked) {
    try {
      box.value = decodeURIComponent(asked[1]);
    } catch (e) {
      box.value = asked[1];
    }
    run();
  }
  box.setAttribute("data-search", "ready");
})();
