"""The commands' parameters, as typer types: each option is declared here once, with its
help and the help panel it is listed in, and used by every command that takes it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

TRANSFORMS = "Transforms"
OUTPUT = "Output"
SOURCES = "Sources"
VERIFY = "Running the graph"

Paths = Annotated[list[str], typer.Argument(
    metavar="PATH", show_default=False,
    help="graphs (.pb, .pbtxt, .meta, SavedModel directories), Python files, notebooks, "
         "or directories of them")]
Only = Annotated[Optional[list[str]], typer.Option(
    "--only", metavar="NAME", rich_help_panel=TRANSFORMS,
    help="run only this transform (repeatable)")]
Settings = Annotated[Optional[list[str]], typer.Option(
    "--set", metavar="NAME.key=value", rich_help_panel=TRANSFORMS,
    help="a transform parameter (repeatable)")]
TargetDevices = Annotated[Optional[str], typer.Option(
    "--target-devices", metavar="DEVICES", rich_help_panel=TRANSFORMS,
    help="devices to place on, e.g. /gpu:0,/gpu:1")]
TfVersion = Annotated[Optional[str], typer.Option(
    "--tf-version", metavar="X.Y", rich_help_panel=TRANSFORMS,
    help="judge placement by TensorFlow X.Y's kernels (graphfix's table of them), whatever "
         "TensorFlow is installed: the cluster's, not this machine's (default: the installed "
         "TF's version, else the newest table)")]

TextOrJson = Annotated[str, typer.Option(
    "--format", metavar="FORMAT", rich_help_panel=OUTPUT, show_default=False,
    help="text or json")]
CheckFormat = Annotated[str, typer.Option(
    "--format", metavar="FORMAT", rich_help_panel=OUTPUT, show_default=False,
    help="text, json, sarif, github (Actions annotations) or junit")]
FixFormat = Annotated[str, typer.Option(
    "--format", metavar="FORMAT", rich_help_panel=OUTPUT, show_default=False,
    help="text, json or github (Actions annotations)")]
VerifyFormat = Annotated[str, typer.Option(
    "--format", metavar="FORMAT", rich_help_panel=OUTPUT, show_default=False,
    help="text, json, github (Actions annotations) or junit (XML, a testcase per check)")]
ReportPath = Annotated[Optional[Path], typer.Option(
    "--report", metavar="FILE", rich_help_panel=OUTPUT,
    help="also write the JSON report to FILE")]
Html = Annotated[Optional[Path], typer.Option(
    "--html", metavar="FILE", rich_help_panel=OUTPUT,
    help="also write the HTML page `graphfix report` writes, for the graphs given (verify: "
         "with its checks)")]

Verbose = Annotated[bool, typer.Option(
    "--verbose", "-v", rich_help_panel=OUTPUT,
    help="also say, on stderr, which TensorFlow's kernels placement was judged by (a table "
         "graphfix ships, or the installed TF's own registry)")]

MinSeverity = Annotated[Optional[str], typer.Option(
    "--severity", metavar="LEVEL", rich_help_panel=OUTPUT,
    help="show only findings this severe or more: error, warning or info (default: info, "
         "all); the exit code counts only what is shown")]
Exclude = Annotated[Optional[list[str]], typer.Option(
    "--exclude", metavar="GLOB", rich_help_panel=SOURCES,
    help="skip files and folders matching GLOB (repeatable)")]
Jobs = Annotated[Optional[int], typer.Option(
    "--jobs", "-j", metavar="N", min=1, rich_help_panel=SOURCES,
    help="processes that read sources at once (default: one per core)")]
NoCache = Annotated[bool, typer.Option(
    "--no-cache", rich_help_panel=SOURCES,
    help="neither read nor write the source result cache (also: GRAPHFIX_NO_CACHE=1)")]
CacheDir = Annotated[Optional[Path], typer.Option(
    "--cache-dir", metavar="DIR", rich_help_panel=SOURCES,
    help="where source results are cached (also: GRAPHFIX_CACHE_DIR; default: "
         ".graphfix_cache in the project root)")]

TIMEOUT_PER_FILE = 600.0  # seconds: far past the largest real file (TF's own, 14k lines)
TimeoutPerFile = Annotated[float, typer.Option(
    "--timeout-per-file", metavar="SECONDS", rich_help_panel=SOURCES,
    help="give up on a source file after this long (it fails with that reason)")]

Out = Annotated[Optional[str], typer.Option(
    "-o", "--output", metavar="OUT", rich_help_panel=OUTPUT,
    help="where to write fixed graphs")]
InPlace = Annotated[bool, typer.Option(
    "--in-place", rich_help_panel=OUTPUT, help="rewrite graphs in place (atomic)")]
Force = Annotated[bool, typer.Option(
    "--force", rich_help_panel=OUTPUT,
    help="rewrite read-only files, and write a SavedModel into a directory graphfix did not "
         "write (its other files are kept)")]
Diff = Annotated[bool, typer.Option(
    "--diff", rich_help_panel=OUTPUT, help="show what would change; write nothing")]
DryRun = Annotated[bool, typer.Option(
    "--dry-run", rich_help_panel=OUTPUT, help="report changes; write nothing")]

Graph = Annotated[str, typer.Argument(
    metavar="GRAPH", show_default=False,
    help="the graph to import and run, or a script (SCRIPT.py -- ARGS): the graph it builds")]
Steps = Annotated[int, typer.Option(
    "--steps", metavar="STEPS", rich_help_panel=VERIFY,
    help="steps of the train op (or fetches) to run")]
Fetch = Annotated[Optional[list[str]], typer.Option(
    "--fetch", metavar="NAME", rich_help_panel=VERIFY, help="tensor or op to run")]
Feed = Annotated[Optional[list[str]], typer.Option(
    "--feed", metavar="NAME=FILE.npy", rich_help_panel=VERIFY,
    help="a value to feed (repeatable)")]
Compare = Annotated[Optional[str], typer.Option(
    "--compare", metavar="ORIGINAL", rich_help_panel=VERIFY,
    help="the original graph: outputs must match")]
Cluster = Annotated[Optional[str], typer.Option(
    "--cluster", metavar="ps=N,worker=M", rich_help_panel=VERIFY,
    help="run on a local TF cluster on loopback")]

TRACE = "Tracing a script"
Script = Annotated[str, typer.Argument(
    metavar="SCRIPT", show_default=False, help="the Python script to run (this runs its code)")]
ScriptArgs = Annotated[Optional[list[str]], typer.Argument(
    metavar="ARGS", show_default=False, help="the script's arguments (after --)")]
Trace = Annotated[bool, typer.Option(
    "--trace", rich_help_panel=TRACE,
    help="run the script PATH (further words are its arguments, after --) and check the "
         "graph it builds, findings at the lines that made the ops (this runs its code)")]
Runs = Annotated[Optional[int], typer.Option(
    "--runs", metavar="N", min=1, rich_help_panel=TRACE,
    help="stop the traced script after N Session.run calls (default: at its first run of "
         "a train op, never run)")]
Until = Annotated[Optional[str], typer.Option(
    "--until", metavar="FILE:LINE", rich_help_panel=TRACE,
    help="stop the traced script when it reaches FILE:LINE (before that line runs)")]
Logdir = Annotated[Optional[Path], typer.Option(
    "--logdir", metavar="DIR", rich_help_panel=OUTPUT,
    help="write TensorBoard's graph dashboard runs to DIR: after/ the verified graph and its "
         "traced step (where each node ran, time, memory), before/ the --compare graph's")]
FixLogdir = Annotated[Optional[Path], typer.Option(
    "--logdir", metavar="DIR", rich_help_panel=OUTPUT,
    help="write TensorBoard's graph dashboard runs to DIR: before/ and after/ each fixed "
         "graph (DIR/NAME/ for several); `verify --logdir` adds where each node ran")]

VerifyFix = Annotated[bool, typer.Option(
    "--verify", rich_help_panel=TRACE,
    help="fix the script PATH (further words are its arguments, after --) only if the fixed "
         "script, run, builds a graph that checks clean and verifies (this runs its code)")]
TraceTimeout = Annotated[float, typer.Option(
    "--timeout", metavar="SECONDS", rich_help_panel=TRACE,
    help="stop the traced script after this long, and say where it was")]
TraceOut = Annotated[Optional[Path], typer.Option(
    "-o", "--output", metavar="OUT", rich_help_panel=OUTPUT,
    help="the folder to write graph.meta and trace.json into (default: SCRIPT's name with "
         ".trace, in the working directory)")]
