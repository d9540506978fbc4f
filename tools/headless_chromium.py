#!/usr/bin/env python3
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Open a local page in headless Chromium (Debian's ``chromium`` package): its rendered DOM, its
console messages and a screenshot.

    python tools/headless_chromium.py results/campaign-demo.html [--screenshot OUT.png]
        [--width 1400] [--colors 256]

Prints every console message of the page (a ``console.*`` call, an uncaught exception) and exits 1
when there is one; with ``--screenshot`` writes the whole page as a
PNG (``--colors N``: reduced to an N-colour palette, to keep a committed one small).

Chromium is driven by its own command line, nothing else, in one launch per page: ``--dump-dom``
prints the DOM after the page's scripts ran, ``--screenshot`` saves the window (cut to the page's
own height, ``data-rendered-height``), and ``--enable-logging=stderr`` writes each console message
as a ``CONSOLE`` line. No browser is downloaded and no Python package is needed beyond Pillow
(matplotlib's) for the cut; the version is Debian's (tools/browser/setup-chromium.sh installs it).
Each launch is a fresh browser with its own empty profile in a temporary folder and no network
(every host name resolves to nothing). A resource that fails to load is not a console message in
this log, so a caller that must know the page needs nothing else checks the rendered DOM for
``src`` and ``href`` (tests/integration/test_campaign_html_browser.py does).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

SETUP = "tools/browser/setup-chromium.sh"
# [pid:tid:date/time.us:INFO:CONSOLE:12] "message", source: file:///... (12)   (Chromium >= 120;
# older ones wrote CONSOLE(12)).
CONSOLE_LINE = re.compile(r"^\[[^\]]*:CONSOLE(?::\d+|\(\d+\))\]\s*(?P<message>.*)$")
# The page's own height, written by its last script (tools/campaign_html.py), for a whole-page screenshot.
HEIGHT_ATTR = re.compile(r'\bdata-rendered-height="(\d+)"')
DEFAULT_WIDTH = 1400
MAX_HEIGHT = 16000
FLAGS = (
    "--headless",
    "--no-sandbox",  # CI runs as root, where Chromium's sandbox refuses to start
    "--disable-gpu",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-extensions",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--force-device-scale-factor=1",
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--enable-logging=stderr",
    "--v=0",
)


class ChromiumMissing(RuntimeError):
    pass


@dataclass
class Rendered:
    dom: str
    console: list[str] = field(default_factory=list)
    height: int | None = None
    seconds: float = 0.0


def find_chromium() -> str:
    """The chromium binary on PATH (Debian's package); ChromiumMissing names the setup script."""
    found = shutil.which("chromium")
    if not found:
        raise ChromiumMissing(
            f"no 'chromium' on PATH: install Debian's package with `bash {SETUP}` (as root; `make pytest` runs it)"
        )
    return found


def _run(page: Path, extra: list[str], width: int, height: int, timeout: float):
    """One fresh headless Chromium on ``page``: (stdout, console messages, seconds). Its whole
    process group is killed when it overruns ``timeout``."""
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        argv = [
            find_chromium(),
            *FLAGS,
            f"--user-data-dir={profile}",
            f"--window-size={width},{height}",
            *extra,
            page.resolve().as_uri(),
        ]
        started = time.monotonic()
        process = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "LANG": "C.UTF-8"},
            start_new_session=True,
        )
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            raise RuntimeError(f"chromium did not finish {page} within {timeout:g} s") from None
        seconds = time.monotonic() - started
    if process.returncode != 0:
        raise RuntimeError(f"chromium exited {process.returncode}: {stderr[-2000:]}")
    console = [m["message"] for line in stderr.splitlines() if (m := CONSOLE_LINE.match(line.strip()))]
    return stdout, console, seconds


def load(
    page: Path, screenshot: Path | None = None, width: int = DEFAULT_WIDTH, height: int = 6000, timeout: float = 120
) -> Rendered:
    """The page's DOM after its scripts ran and its console messages, in one browser; with
    ``screenshot``, a PNG of the whole page there too (cut to the page's own rendered height; a page
    taller than ``height`` is loaded once more, at its height, up to MAX_HEIGHT)."""
    extra = ["--dump-dom"]
    if screenshot is not None:
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        screenshot.unlink(missing_ok=True)
        extra.append(f"--screenshot={screenshot.resolve()}")
    dom, console, seconds = _run(page, extra, width, height, timeout)
    found = HEIGHT_ATTR.search(dom)
    rendered = Rendered(dom=dom, console=console, height=int(found.group(1)) if found else None, seconds=seconds)
    if screenshot is None:
        return rendered
    if rendered.height and rendered.height > height and height < MAX_HEIGHT:
        return load(page, screenshot, width, min(rendered.height, MAX_HEIGHT), timeout)
    if not screenshot.is_file():
        raise RuntimeError(f"chromium wrote no screenshot at {screenshot}")
    if rendered.height and rendered.height < height:
        from PIL import Image

        with Image.open(screenshot) as image:
            cut = image.crop((0, 0, image.width, rendered.height))
        cut.save(screenshot)
    return rendered


def shrink_png(path: Path, colors: int) -> None:
    """Reduce the PNG to a ``colors``-colour palette (Pillow, which matplotlib brings), optimised."""
    from PIL import Image

    with Image.open(path) as image:
        small = image.convert("RGB").quantize(colors=colors, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    small.save(path, optimize=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("page", type=Path)
    parser.add_argument("--screenshot", type=Path, help="write the whole page as a PNG here")
    parser.add_argument("--width", type=int, default=DEFAULT_WIDTH)
    parser.add_argument("--colors", type=int, help="reduce the screenshot to a palette of this many colours")
    args = parser.parse_args(argv)
    if not args.page.is_file():
        parser.error(f"no such page: {args.page}")
    try:
        rendered = load(args.page, args.screenshot, args.width)
    except ChromiumMissing as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for message in rendered.console:
        print(f"console: {message}")
    if args.screenshot:
        if args.colors:
            shrink_png(args.screenshot, args.colors)
        size = args.screenshot.stat().st_size
        print(f"screenshot: {args.screenshot} ({args.width}x{rendered.height or '?'}, {size} bytes)")
    print(f"rendered {args.page} in {rendered.seconds:.1f} s: {len(rendered.console)} console message(s)")
    return 1 if rendered.console else 0


if __name__ == "__main__":
    sys.exit(main())
