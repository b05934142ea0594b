// cogworker web UI: the only script the pages load (the Content-Security-Policy allows
// no other). Confirmations, select-all, the dashboard's polling, /busy's auto-refresh.
"use strict";

document.addEventListener("submit", function (event) {
  var form = event.target;
  var message = form.getAttribute("data-confirm");
  var submitter = event.submitter;
  if (!message && form.hasAttribute("data-confirm-delete") && submitter &&
      (submitter.value === "delete" || submitter.value === "kill")) {
    message = form.getAttribute("data-confirm-delete");
  }
  if (!message) {
    return;
  }
  if (!window.confirm(message)) {
    event.preventDefault();
    return;
  }
  // Asked and accepted here: the server's own confirmation page (the same question, for a
  // browser without this script) is skipped.
  if (!form.querySelector('input[name="confirm"]')) {
    var field = document.createElement("input");
    field.type = "hidden";
    field.name = "confirm";
    field.value = "yes";
    form.appendChild(field);
  }
});

document.addEventListener("change", function (event) {
  var box = event.target;
  if (!box.hasAttribute || !box.hasAttribute("data-select-all")) {
    return;
  }
  var form = box.form || box.closest("form");
  form.querySelectorAll('input[type="checkbox"][name="entry"]').forEach(function (each) {
    each.checked = box.checked;
  });
});

// Every number of the dashboard, from one /stats.json answer: counters and the status
// line (data-counter: a number), texts the server formatted (data-text), and parts shown
// only while their number is not zero (data-shown-if); a count's noun in the number's
// form (data-noun, data-one, data-many: "1 live process", "2 live processes").
function showStats(data) {
  document.querySelectorAll("[data-noun]").forEach(function (cell) {
    var value = data[cell.getAttribute("data-noun")];
    if (typeof value === "number") {
      cell.textContent = cell.getAttribute(value === 1 ? "data-one" : "data-many");
    }
  });
  document.querySelectorAll("[data-counter]").forEach(function (cell) {
    var value = data[cell.getAttribute("data-counter")];
    if (typeof value === "number") {
      cell.textContent = value.toLocaleString("en-US");
      var box = cell.closest("[data-warn-nonzero]");
      if (box) {
        box.classList.toggle("warn", value > 0);
      }
    }
  });
  document.querySelectorAll("[data-text]").forEach(function (cell) {
    var value = data[cell.getAttribute("data-text")];
    if (value !== undefined && value !== null) {
      cell.textContent = String(value);
    }
  });
  document.querySelectorAll("[data-shown-if]").forEach(function (part) {
    part.hidden = !data[part.getAttribute("data-shown-if")];
  });
}

// A chart is drawn by the server for the width of its box (?w=, at most 720 px): on a
// phone's 390 px screen its text stays legible, not scaled down to half.
function chartWidth(box) {
  return Math.max(300, Math.min(720, Math.floor(box.clientWidth) - 2));
}

function withWidth(url, box) {
  return url + (url.indexOf("?") < 0 ? "?" : "&") + "w=" + chartWidth(box);
}

// Charts drawn wider than their box (a narrow screen), drawn again for it, once.
function fitCharts() {
  document.querySelectorAll("[data-fit]").forEach(function (box) {
    if (box.clientWidth >= 722) {
      return;
    }
    fetch(withWidth(box.getAttribute("data-fit"), box), {credentials: "same-origin", cache: "no-store"})
      .then(function (response) { return response.ok ? response.text() : Promise.reject(response.status); })
      .then(function (svg) { box.innerHTML = svg; })
      .catch(function () {});
  });
}

// The day charts: SVG drawn by the server, put in place as markup (tooltips kept).
function refreshCharts() {
  document.querySelectorAll("[data-refresh]").forEach(function (box) {
    fetch(withWidth(box.getAttribute("data-refresh"), box), {credentials: "same-origin", cache: "no-store"})
      .then(function (response) { return response.ok ? response.text() : Promise.reject(response.status); })
      .then(function (svg) { box.innerHTML = svg; })
      .catch(function () {});
  });
}

function startPolling() {
  var counters = document.getElementById("counters");
  var chart = document.getElementById("live-chart");
  var toggle = document.getElementById("live-toggle");
  var state = document.getElementById("live-state");
  if (!counters || !chart) {
    return;
  }
  var paused = false;
  function poll() {
    if (paused) {
      return;
    }
    fetch(counters.getAttribute("data-stats-url"), {credentials: "same-origin", cache: "no-store"})
      .then(function (response) { return response.json(); })
      .then(function (data) {
        showStats(data);
        chart.src = withWidth(chart.getAttribute("data-src"), chart.parentNode) + "&t=" + Date.now();
        refreshCharts();
        state.textContent = "polling every 2 s, last " + new Date().toLocaleTimeString();
      })
      .catch(function () { state.textContent = "not answering; retrying"; });
  }
  toggle.addEventListener("click", function () {
    paused = !paused;
    toggle.textContent = paused ? "Resume" : "Pause";
    toggle.setAttribute("aria-pressed", paused ? "true" : "false");
    state.textContent = paused ? "paused" : "polling every 2 s";
    poll();
  });
  poll();
  window.setInterval(poll, 2000);
}

function startAutoRefresh() {
  var box = document.getElementById("auto-refresh");
  if (!box) {
    return;
  }
  var key = "cogworker-refresh:" + location.pathname;
  box.checked = window.localStorage.getItem(key) === "on";
  var timer = null;
  function arm() {
    window.clearTimeout(timer);
    if (box.checked) {
      timer = window.setTimeout(function () { location.reload(); },
                                1000 * Number(box.getAttribute("data-seconds") || 5));
    }
  }
  box.addEventListener("change", function () {
    window.localStorage.setItem(key, box.checked ? "on" : "off");
    arm();
  });
  arm();
}

document.addEventListener("DOMContentLoaded", function () {
  startPolling();
  startAutoRefresh();
  fitCharts();
});
