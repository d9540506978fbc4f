"""Write the files described by the JSON list on stdin: [{"path", "content", "mode"}].

Used by the shared prepare to lay out several small stand-in files in one call: over
podman exec every Ansible file task costs about a second, a few dozen of them add up.
"""

import json
import os
import sys

for entry in json.load(sys.stdin):
    os.makedirs(os.path.dirname(entry["path"]), exist_ok=True)
    with open(entry["path"], "w") as handle:
        handle.write(entry["content"])
    os.chmod(entry["path"], int(entry["mode"], 8))
    print(entry["path"])
