(function () {
  "use strict";
  var box = document.getElementById("q");
  var said = document.getElementById("qn");
  var units = document.querySelectorAll(".s");
  var texts = null;
  // Opens every <details> around (and at) the element with this id.
  function openAt(id) {
    var el = document.getElementById(id);
    for (var at = el; at; at = at.parentElement) {
      if (at.tagName === "DETAILS") {
        at.open = true;
      }
    }
    return el;
  }
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
        if (want !== "" && units[j].tagName === "DETAILS") {
          units[j].open = true;
        }
      }
    }
    said.textContent = want === "" ? "" : shown + " of " + units.length + " blocks match";
  }
  box.addEventListener("input", run);
  // #ID opens the chain or line it names; #open=ID opens it without moving there;
  // #search=WORDS opens the page filtered by WORDS.
  function follow() {
    var hash = window.location.hash;
    var asked = /^#search=(.*)$/.exec(hash);
    var opened = /^#open=(.*)$/.exec(hash);
    try {
      if (asked) {
        box.value = decodeURIComponent(asked[1]);
        run();
      } else if (opened) {
        openAt(decodeURIComponent(opened[1]));
      } else if (hash.length > 1) {
        var el = openAt(decodeURIComponent(hash.slice(1)));
        if (el) {
          el.scrollIntoView();
        }
      }
    } catch (e) {
      // A fragment that is no id of this page: nothing to open.
    }
  }
  window.addEventListener("hashchange", follow);
  follow();
  box.setAttribute("data-search", "ready");
})();
