"""report.html in a real browser: headless Chromium, offline, no extra Python packages.

The page is opened from a file:// URL with every host name made unresolvable, so
anything it tried to fetch from the network would fail. A small probe script,
appended to a copy of the page (the report itself is not changed), waits for
the plots, hovers the first point of the Pareto front with plotly's own
``Plotly.Fx.hover`` and writes what it sees into the DOM, which Chromium dumps
(``--dump-dom``). Checked: every plot div holds rendered SVG (``main-svg``),
plotly accepted every figure, and the hover label lists the design's
parameters.

Needs Debian's ``chromium`` (``apt-get install -y --no-install-recommends
chromium``); without it the test is skipped with the reason shown (and a
warning, so that a plain ``pytest -q`` shows it too). ``DSE_CHROMIUM`` names
another binary.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import warnings

import pytest

from dse import report
from dse.study.results import format_value, pareto_table
from tests.test_report import PARAMS, make_study

PLOT_IDS = ["pareto-0", "pareto-1", "pareto-2", "parcoords"]

PROBE = """
<script>
window.addEventListener('load', function () {
  setTimeout(function () {
    var out = {plotted: {}, traces: [], hover: null, error: null};
    try {
      %(ids)s.forEach(function (id) {
        var gd = document.getElementById(id);
        out.plotted[id] = !!(gd && gd._fullLayout && gd._fullData && gd._fullData.length);
      });
      // rendered boxes: the catalog chips' labels of each Pareto plot, and the parallel-coordinates title
      // against its axis names (checked for overlap below)
      var box = function (el) { var r = el.getBoundingClientRect();
        return {x0: r.left, y0: r.top, x1: r.right, y1: r.bottom, text: el.textContent}; };
      out.labels = {};
      %(ids)s.forEach(function (id) {
        var g = document.getElementById(id);
        out.labels[id] = Array.prototype.map.call(g.querySelectorAll('.annotation-text'), box);
      });
      var pc = document.getElementById('parcoords');
      out.pc_title = Array.prototype.map.call(pc.querySelectorAll('.gtitle'), box);
      out.pc_axes = Array.prototype.map.call(pc.querySelectorAll('.axis-title'), box);
      var gd = document.getElementById('pareto-0');
      out.traces = gd._fullData.map(function (t) {
        return {name: t.name, hovertemplate: t.hovertemplate || '', n: (t.x || []).length,
                customdata: t.customdata ? t.customdata[0] : null};
      });
      var front = gd._fullData.findIndex(function (t) { return t.name.indexOf('Pareto front') === 0; });
      Plotly.Fx.hover(gd, [{curveNumber: front, pointNumber: 0}]);
      var layer = gd.querySelector('.hoverlayer');
      out.hover = layer ? layer.textContent : null;
    } catch (e) { out.error = String(e && e.stack || e); }
    var pre = document.createElement('pre');
    pre.id = 'dse-probe';
    pre.textContent = JSON.stringify(out);
    document.body.appendChild(pre);
  }, 200);
});
</script>
"""


def _chromium() -> str:
    for cand in (os.environ.get("DSE_CHROMIUM"), "/usr/bin/chromium", shutil.which("chromium")):
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    reason = ("headless Chromium not found (/usr/bin/chromium); install it with "
              "`apt-get install -y --no-install-recommends chromium` or set DSE_CHROMIUM")
    warnings.warn(f"report.html browser test skipped: {reason}", stacklevel=2)
    pytest.skip(reason)


def _dump_dom(chromium: str, page, profile) -> tuple[str, str]:
    cmd = [
        chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--no-first-run", "--disable-component-update", "--disable-sync", f"--user-data-dir={profile}",
        "--disable-dev-shm-usage", "--disable-extensions", "--mute-audio",
        "--host-resolver-rules=MAP * ~NOTFOUND",  # offline: no host name resolves
        "--virtual-time-budget=15000", "--window-size=1280,2000",
        "--dump-dom", page.as_uri(),
    ]
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        pytest.fail("headless Chromium did not finish within 120 s")
    assert res.returncode == 0, f"chromium exited {res.returncode}:\n{res.stderr[-3000:]}"
    return res.stdout, res.stderr


def test_report_html_renders_offline_with_parameters_on_hover(tmp_path):
    chromium = _chromium()
    table, meta, catalog = make_study(n=60, seed=0)
    out = tmp_path / "study"
    report.write_reports(out, table, meta, catalog)
    html = (out / "report.html").read_text(encoding="utf-8")
    main_svg = re.compile(r'<svg[^>]*\bclass="main-svg"')
    assert not main_svg.search(html), "the file itself must not contain rendered SVG"
    page = out / "probe.html"
    page.write_text(html.replace("</body>", PROBE % {"ids": json.dumps(PLOT_IDS)} + "</body>"), encoding="utf-8")

    dom, stderr = _dump_dom(chromium, page, tmp_path / "profile")

    m = re.search(r'<pre id="dse-probe">(.*?)</pre>', dom, re.S)
    assert m, f"the probe did not run (page not loaded?); chromium said:\n{stderr[-3000:]}"
    probe = json.loads(m.group(1).replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"')
                       .replace("&amp;", "&"))
    assert probe["error"] is None, probe["error"]
    assert probe["plotted"] == {i: True for i in PLOT_IDS}

    # no two labels overlap as the browser draws them (issue 19 item 8: catalog labels collided), and the
    # parallel-coordinates title stays clear of its axis names
    def overlap(a, b):
        return min(a["x1"], b["x1"]) - max(a["x0"], b["x0"]) > 0.5 and min(a["y1"], b["y1"]) - max(a["y0"], b["y0"]) > 0.5

    assert sum(len(b) for b in probe["labels"].values()) >= 4, probe["labels"]  # the catalog chips are labelled
    for pid, boxes in probe["labels"].items():
        clashes = [(a["text"], b["text"]) for i, a in enumerate(boxes) for b in boxes[i + 1:] if overlap(a, b)]
        assert not clashes, f"#{pid}: overlapping labels {clashes}"
    assert probe["pc_title"] and len(probe["pc_axes"]) == len(PARAMS) + 3, (probe["pc_title"], probe["pc_axes"])
    hits = [a["text"] for a in probe["pc_axes"] for t in probe["pc_title"] if overlap(a, t)]
    assert not hits, f"the parallel-coordinates title covers the axis names {hits}"

    # every plot div holds rendered SVG
    starts = {i: dom.find(f'id="{i}"') for i in PLOT_IDS}
    assert all(s >= 0 for s in starts.values())
    bounds = sorted(starts.values()) + [len(dom)]
    for i, s in starts.items():
        chunk = dom[s:bounds[bounds.index(s) + 1]]
        assert len(main_svg.findall(chunk)) >= 1, f"no rendered SVG in #{i}"
    assert len(main_svg.findall(dom)) >= 2 * len(PLOT_IDS)

    # hover: the template and the customdata carry every parameter; the rendered label shows them
    names = [t["name"] for t in probe["traces"]]
    assert any(n.startswith("Pareto front") for n in names) and "catalog chips" in names
    front = next(t for t in probe["traces"] if t["name"].startswith("Pareto front"))
    for p in PARAMS:
        assert f"{p[2:]} = %{{customdata[" in front["hovertemplate"]
    assert len(front["customdata"]) == 1 + len(PARAMS) + 2
    label = probe["hover"] or ""
    assert label.startswith("Pareto front") or "trial" in label, label
    first = pareto_table(table, meta, x="latency_per_token", y="energy_per_token").iloc[0]
    assert f"trial {first['trial']}" in label
    for p in PARAMS:
        assert f"{p[2:]} = " in label, label
    assert f"precision = {first['p.precision']}" in label
    assert format_value(first["p.clock"], "Hz") in label
