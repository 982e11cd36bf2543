// Runs before the first paint (a classic script in <head>): applies the
// reader's theme and accent so a dark page never flashes light. The module
// code (prefs.js) owns these settings afterwards.
(function () {
  try {
    var root = document.documentElement;
    var theme = JSON.parse(localStorage.getItem("llamaswap.theme") || "null");
    if (theme === "light" || theme === "dark") root.setAttribute("data-theme", theme);
    var accent = JSON.parse(localStorage.getItem("llamaswap.accent") || "null");
    if (typeof accent === "string" && accent !== "blue") root.setAttribute("data-accent", accent);
  } catch (e) {
    // No storage or an unreadable value: the defaults apply.
  }
})();
