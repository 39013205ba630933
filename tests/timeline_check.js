// Appended to a rendered timeline by tests/timeline.rs and run by headless Chromium as the page
// loads: measures the page as a person would see it and writes the findings, as JSON, into
// a <pre> element (id: check), which `chromium --dump-dom` then prints.
(function () {
  const shown = (el) => {
    const r = el.getBoundingClientRect();
    return r.width > 0 && r.height > 0;
  };
  // Pairs of visible SVG texts whose boxes overlap by more than half a pixel each way.
  const overlaps = () => {
    const boxes = [...document.querySelectorAll("svg text")]
      .filter(shown)
      .map((el) => [el, el.getBoundingClientRect()]);
    boxes.sort((a, b) => a[1].top - b[1].top);
    const out = [];
    for (let i = 0; i < boxes.length; i++) {
      const [ea, a] = boxes[i];
      for (let j = i + 1; j < boxes.length && boxes[j][1].top < a.bottom - 0.5; j++) {
        const [eb, b] = boxes[j];
        if (a.left < b.right - 0.5 && b.left < a.right - 0.5 && a.top < b.bottom - 0.5 && b.top < a.bottom - 0.5) {
          out.push(ea.textContent + " | " + eb.textContent);
        }
      }
    }
    return { texts: boxes.length, overlaps: out.slice(0, 10), count: out.length };
  };
  // Adjacent axis ticks drawn closer than to scale must have a visible cut mark between them.
  const unmarkedCuts = () => {
    // A time cut, or the note where a hidden band was.
    const cuts = [...document.querySelectorAll("g.cut, text.strip-note")].filter(shown).map((g) => {
      const r = g.getBoundingClientRect();
      return (r.top + r.bottom) / 2;
    });
    const ticks = [...document.querySelectorAll("svg text.tick")]
      .filter(shown)
      .map((t) => [parseFloat(t.textContent), t.getBoundingClientRect().top])
      .sort((a, b) => a[1] - b[1]);
    const bad = [];
    let compressed = 0;
    for (let i = 1; i < ticks.length; i++) {
      const [t0, y0] = ticks[i - 1];
      const [t1, y1] = ticks[i];
      if (y1 - y0 < (t1 - t0) * PX_PER_MS - 1) {
        compressed++;
        if (!cuts.some((y) => y > y0 && y < y1)) bad.push(t0 + " ms to " + t1 + " ms");
      }
    }
    return { compressed, cuts: cuts.length, unmarked: bad };
  };
  const initShown = () =>
    [...document.querySelectorAll(".ph-init *, .init")].filter(shown).length;
  const state = () => {
    const v = document.getElementById("first-violation");
    const r = v && v.getBoundingClientRect();
    return {
      labels: overlaps(),
      axis: unmarkedCuts(),
      doc_width: document.documentElement.scrollWidth,
      view_width: document.documentElement.clientWidth,
      violation: r ? { top: r.top, bottom: r.bottom, left: r.left, right: r.right } : null,
      init_shown: initShown(),
    };
  };
  const result = { inner: [window.innerWidth, window.innerHeight], initial: state(), toggled: null, again: null };
  const box = document.getElementById("show-init");
  if (box) {
    box.click();
    result.toggled = state();
    box.click();
    result.again = state();
  }
  const pre = document.createElement("pre");
  pre.id = "check";
  pre.textContent = JSON.stringify(result);
  document.body.appendChild(pre);
})();
