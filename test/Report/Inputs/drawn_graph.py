"""Says what a browser drew of a report's graph.html: reads the DOM that
`chromium --dump-dom` printed (stdin) after the page's script ran, and
prints the ops the page holds, the nodes and folds drawn, the text of each
fold, and the canvas's size and zoom (the svg's width over its viewBox's).
"""
import html.parser
import json
import sys


class Drawn(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.nodes = self.folds = 0
        self.fold_lines = []
        self.in_fold = False
        self.depth = 0
        self.in_text = False
        self.in_data = False
        self.data = ""
        self.canvas = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "svg" and a.get("id") == "canvas":
            self.canvas = a
        if tag == "script" and a.get("id") == "report-data":
            self.in_data = True
        if tag == "g" and a.get("class", "").split()[:1] == ["node"]:
            self.nodes += 1
            if "fold" in a["class"].split():
                self.folds += 1
                self.in_fold = True
                self.depth = 0
                self.fold_lines.append([])
        elif tag == "g" and self.in_fold:
            self.depth += 1
        self.in_text = tag == "text"

    def handle_endtag(self, tag):
        if tag == "script":
            self.in_data = False
        if tag == "text":
            self.in_text = False
        if tag == "g" and self.in_fold:
            if self.depth == 0:
                self.in_fold = False
            else:
                self.depth -= 1

    def handle_data(self, text):
        if self.in_data:
            self.data += text
        elif self.in_fold and self.in_text:
            self.fold_lines[-1].append(text)


d = Drawn()
d.feed(sys.stdin.read())
ops = len(json.loads(d.data)["ops"])
print("ops in the page: %d" % ops)
print("nodes drawn: %d, of which folds: %d" % (d.nodes, d.folds))
print("fewer than a tenth of the ops drawn: %s"
      % ("yes" if d.nodes * 10 < ops else "no"))
for lines in d.fold_lines:
    print("fold: " + " | ".join(lines))
if d.canvas:
    width = float(d.canvas["width"])
    view = [float(v) for v in d.canvas["viewbox"].split()]
    print("canvas: %dx%d at zoom %.2f" % (view[2], view[3], width / view[2]))
