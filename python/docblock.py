"""What the peers' Python drivers share: the doc blocks they rewrite, and
the flags that name the `rlvr serve --tinker` server they drive."""

import os


def replace(path, name, text):
    """Rewrites the text between <!-- begin NAME --> and <!-- end NAME --> in path."""
    begin, end = f"<!-- begin {name} -->", f"<!-- end {name} -->"
    with open(path) as f:
        doc = f.read()
    i, j = doc.index(begin) + len(begin), doc.index(end)
    with open(path, "w") as f:
        f.write(doc[:i] + "\n" + text + "\n" + doc[j:])


def server_flags(ap):
    """Adds the flags naming the server, its base model and the output folder."""
    ap.add_argument("--base-url", required=True)
    ap.add_argument("--model", required=True, help="the server's name of the base model")
    ap.add_argument("--out", required=True)
    ap.add_argument("--api-key", default=os.environ.get("TINKER_API_KEY", "tml-rlvr-local"))
