"""The source result cache (.graphfix_cache): what hits, what misses, where it lives, and
that a cached run reports exactly what an uncached one does."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from conftest import FIXTURES, run_cli
from test_source_trees import _tree_of_fixtures

BUG = ("import tensorflow as tf\n\nwith tf.device('/gpu:0'):\n"
       "    step = tf.Variable(0, name='step')\n")


def _run(command, *args, cache=None, cwd=None, env=None):
    """`graphfix COMMAND ARGS --format json` with the cache in `cache` (None: as configured)."""
    extra = ["--cache-dir", cache] if cache is not None else []
    result = run_cli(command, *args, "--format", "json", *extra, cwd=cwd, env=env)
    assert result.returncode in (0, 1), (result.stdout, result.stderr)
    return json.loads(result.stdout)


def _without_cache_count(doc):
    """The report minus the one figure a cache may change: how many files it served."""
    doc = json.loads(json.dumps(doc))
    del doc["summary"]["cached"]
    return doc


def _entries(cache):
    return sorted(p for p in cache.rglob("*") if p.is_file()
                  and p.name not in ("CACHEDIR.TAG", ".gitignore", ".pruned"))


@pytest.fixture
def fixtures_tree(tmp_path):
    root = tmp_path / "tree"
    root.mkdir()
    return _tree_of_fixtures(root)


def test_second_check_reads_every_file_from_the_cache_and_reports_the_same(tmp_path,
                                                                           fixtures_tree):
    cache = tmp_path / "cache"
    uncached = _run("check", "tree", "--no-cache", cwd=tmp_path)
    assert not cache.exists()
    cold = _run("check", "tree", cache=cache, cwd=tmp_path)
    files = cold["summary"]["files_unchanged"] + cold["summary"]["skipped"]
    assert files > 10 and cold["summary"]["findings"] > 6 and len(cold["skipped"]) == 3
    assert cold["summary"]["cached"] == 0
    warm = _run("check", "tree", cache=cache, cwd=tmp_path)
    assert warm["summary"]["cached"] == files
    warm_parallel = _run("check", "tree", "--jobs", "3", cache=cache, cwd=tmp_path)
    assert warm_parallel["summary"]["cached"] == files
    assert (_without_cache_count(uncached) == _without_cache_count(cold)
            == _without_cache_count(warm) == _without_cache_count(warm_parallel))
    # the text output too
    texts = [run_cli("check", "tree", *extra, cwd=tmp_path).stdout
             for extra in (["--no-cache"], ["--cache-dir", cache])]
    assert texts[0] == texts[1]


def test_a_cached_entry_is_what_check_reports(tmp_path):
    """Evidence that a warm run reads entries rather than the files: an entry edited by
    hand (as no run would write it) is what the next run reports."""
    (tmp_path / "model.py").write_text(BUG)
    cache = tmp_path / "cache"
    cold = _run("check", "model.py", "--only", "variables-to-cpu", cache=cache, cwd=tmp_path)
    assert [f["line"] for f in cold["findings"]] == [4]
    (entry,) = [e for e in _entries(cache) if "findings" in json.loads(e.read_text())]
    doc = json.loads(entry.read_text())
    doc["findings"][0]["message"] = "read from the cache"
    entry.write_text(json.dumps(doc))
    warm = _run("check", "model.py", "--only", "variables-to-cpu", cache=cache, cwd=tmp_path)
    assert [f["message"] for f in warm["findings"]] == ["read from the cache"]


def test_an_edited_file_is_checked_again(tmp_path):
    for name in ("a.py", "b.py"):
        (tmp_path / name).write_text("import tensorflow as tf\nx = 1\n")
    cache = tmp_path / "cache"
    first = _run("check", "a.py", "b.py", cache=cache, cwd=tmp_path)
    assert first["summary"]["findings"] == 0
    (tmp_path / "b.py").write_text(BUG)
    second = _run("check", "a.py", "b.py", cache=cache, cwd=tmp_path)
    assert second["summary"]["cached"] == 1
    assert [(f["path"], f["line"]) for f in second["findings"]] == [("b.py", 4)]


def test_other_transforms_or_options_miss(tmp_path):
    (tmp_path / "m.py").write_text(BUG)
    cache = tmp_path / "cache"
    _run("check", "m.py", cache=cache, cwd=tmp_path)
    assert _run("check", "m.py", cache=cache, cwd=tmp_path)["summary"]["cached"] == 1
    only = _run("check", "m.py", "--only", "variables-to-cpu", cache=cache, cwd=tmp_path)
    assert only["summary"]["cached"] == 0
    option = _run("check", "m.py", "--set", "replica-placement.ps_device=/job:params",
                  cache=cache, cwd=tmp_path)
    assert option["summary"]["cached"] == 0
    # the same path given another way names the findings differently: another entry
    spelled = _run("check", "./m.py", cache=cache, cwd=tmp_path)
    assert spelled["summary"]["cached"] == 0 and spelled["findings"][0]["path"] == "./m.py"


def test_a_corrupt_entry_is_a_miss(tmp_path, fixtures_tree):
    cache = tmp_path / "cache"
    cold = _run("check", "tree", cache=cache, cwd=tmp_path)
    entries = _entries(cache)
    damage = [b"", b"{not json", b"[]", b'{"key": "another"}', b"\x00" * 40]
    for number, entry in enumerate(entries):
        data = entry.read_bytes()
        if number % 3 == 0:  # valid JSON of the right key, wrong shape
            doc = json.loads(data)
            doc.update(findings=[{"path": 1}], facts={"set": 5}, skipped=[])
            entry.write_text(json.dumps(doc))
        else:
            entry.write_bytes(damage[number % len(damage)] or data[: len(data) // 2])
    again = _run("check", "tree", cache=cache, cwd=tmp_path)
    assert again["summary"]["cached"] == 0
    assert _without_cache_count(again) == _without_cache_count(cold)
    # the damaged entries were written anew
    assert _run("check", "tree", cache=cache, cwd=tmp_path)["summary"]["cached"] == \
        cold["summary"]["files_unchanged"] + cold["summary"]["skipped"]


def test_no_cache_writes_nothing(tmp_path):
    root = tmp_path / "proj"
    root.mkdir()
    (root / "pyproject.toml").write_text('[project]\nname = "x"\n')
    (root / "m.py").write_text(BUG)
    unset = {"GRAPHFIX_CACHE_DIR": None}
    _run("check", "m.py", "--no-cache", cwd=root, env=unset)
    _run("fix", "m.py", "--no-cache", "--dry-run", cwd=root, env=unset)
    _run("check", "m.py", cwd=root, env={**unset, "GRAPHFIX_NO_CACHE": "1"})
    assert sorted(p.name for p in root.iterdir()) == ["m.py", "pyproject.toml"]


def test_default_place_is_the_project_root_and_git_ignores_it(tmp_path):
    root = tmp_path / "proj"
    (root / "src").mkdir(parents=True)
    (root / "pyproject.toml").write_text('[project]\nname = "x"\n')
    (root / "src" / "m.py").write_text(BUG)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    unset = {"GRAPHFIX_CACHE_DIR": None}
    _run("check", root / "src", cwd=tmp_path, env=unset)  # run from outside the project
    cache = root / ".graphfix_cache"
    assert (cache / "CACHEDIR.TAG").read_text().startswith(
        "Signature: 8a477f597d28d172789f06886806bc55")
    assert (cache / ".gitignore").read_text().splitlines()[-1] == "*"
    assert _entries(cache)
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"],
                            cwd=root, capture_output=True, text=True, check=True).stdout
    assert ".graphfix_cache" not in status and "src/m.py" in status
    again = _run("check", "src", cwd=root, env=unset)  # from inside: the same folder
    assert again["summary"]["cached"] == 0  # another label ("src/m.py"), another entry
    assert _run("check", "src", cwd=root, env=unset)["summary"]["cached"] == 1
    assert sorted(p.name for p in root.iterdir()) == [".git", ".graphfix_cache",
                                                      "pyproject.toml", "src"]


def test_cache_dir_from_config_environment_and_flag(tmp_path):
    root = tmp_path / "proj"
    root.mkdir()
    (root / "pyproject.toml").write_text('[tool.graphfix]\ncache-dir = "build/gfx"\n')
    (root / "m.py").write_text(BUG)
    unset = {"GRAPHFIX_CACHE_DIR": None}
    _run("check", "m.py", cwd=root, env=unset)
    assert _entries(root / "build" / "gfx") and not (root / ".graphfix_cache").exists()
    _run("check", "m.py", cwd=root, env={"GRAPHFIX_CACHE_DIR": str(tmp_path / "env")})
    assert _entries(tmp_path / "env")
    _run("check", "m.py", cache=tmp_path / "flag", cwd=root,
         env={"GRAPHFIX_CACHE_DIR": str(tmp_path / "env2")})
    assert _entries(tmp_path / "flag") and not (tmp_path / "env2").exists()
    (root / "pyproject.toml").write_text("[tool.graphfix]\ncache-dir = 3\n")
    bad = run_cli("check", "m.py", cwd=root)
    assert bad.returncode == 2 and "cache-dir must be a folder name" in bad.stderr


def test_an_unusable_cache_folder_turns_the_cache_off(tmp_path):
    (tmp_path / "m.py").write_text(BUG)
    (tmp_path / "afile").write_text("not a folder")
    for cache in (tmp_path / "afile", tmp_path / "afile" / "cache"):
        result = run_cli("check", "m.py", "--cache-dir", cache, cwd=tmp_path)
        assert result.returncode == 1 and result.stderr.strip() == "", result.stderr
        assert "m.py:4:" in result.stdout
    assert (tmp_path / "afile").read_text() == "not a folder"


def test_cross_file_facts_decide_whether_an_unchanged_file_is_checked_again(tmp_path):
    """train.py's update-ops finding needs the batch norm of model.py: editing model.py
    alone must re-check train.py, and each state of model.py has its own entries."""
    tree = tmp_path / "multi"
    shutil.copytree(FIXTURES / "update_ops" / "source" / "multi_file" / "before", tree)
    model = tree / "model.py"
    original = model.read_text()
    cache = tmp_path / "cache"

    def train_findings():
        doc = _run("check", "multi", "--only", "update-ops", cache=cache, cwd=tmp_path)
        return doc, [f["line"] for f in doc["findings"] if f["path"] == "multi/train.py"]

    doc, lines = train_findings()
    assert lines and doc["summary"]["cached"] == 0
    model.write_text(original.replace("normalizer_fn=slim.batch_norm,",
                                      "normalizer_fn=None,"))
    doc, without = train_findings()
    assert without == [] and doc["summary"]["cached"] == 0, doc
    model.write_text(original)
    doc, back = train_findings()
    assert back == lines and doc["summary"]["cached"] == 2


def test_a_module_named_through_its_package_re_checks_the_file_importing_it(tmp_path):
    """`import nets.model` binds `nets` alone; `nets.model.build` is found in
    nets/model.py all the same (a namespace package, no `__init__`): editing that file
    re-checks train.py, and the same with a checker per file (`--jobs 2`)."""
    (tmp_path / "nets").mkdir()
    model = tmp_path / "nets" / "model.py"
    model.write_text("import tensorflow as tf\n"
                     "def build(x):\n    return tf.layers.batch_normalization(x, training=True)\n")
    (tmp_path / "train.py").write_text(
        "import tensorflow as tf\nimport nets.model\n"
        "train_op = tf.train.AdamOptimizer().minimize(tf.reduce_sum(nets.model.build(x)))\n")
    for jobs in ("1", "2"):
        cache = tmp_path / f"cache-{jobs}"
        model.write_text(model.read_text().replace("training=False", "training=True"))
        cold = _run("check", ".", "--jobs", jobs, cache=cache, cwd=tmp_path)
        assert [f["path"] for f in cold["findings"]] == ["train.py"]
        model.write_text(model.read_text().replace("training=True", "training=False"))
        edited = _run("check", ".", "--jobs", jobs, cache=cache, cwd=tmp_path)
        assert edited["findings"] == [] and edited["summary"]["cached"] == 0, edited


def test_cross_file_facts_of_feed_to_assign(tmp_path):
    """train.py feeds `model.word_vectors`; whether that is a variable is model.py's fact."""
    tree = tmp_path / "multi"
    shutil.copytree(FIXTURES / "feed_to_assign" / "source" / "multi_file" / "before", tree)
    model = tree / "model.py"
    cache = tmp_path / "cache"

    def fed_variables():
        doc = _run("check", "multi", "--only", "feed-to-assign", cache=cache, cwd=tmp_path)
        return [f["line"] for f in doc["findings"] if f["path"] == "multi/train.py"]

    assert fed_variables()
    model.write_text(model.read_text().replace(
        'self.word_vectors = tf.get_variable("word_vectors", [vocab, dim])',
        'self.word_vectors = tf.placeholder(tf.float32, [vocab, dim])'))
    assert fed_variables() == []


def test_fix_skips_files_known_clean_and_writes_what_an_uncached_fix_writes(tmp_path,
                                                                            fixtures_tree):
    for noop in sorted(FIXTURES.glob("*/source/noop_*/before.py")):  # clean files
        shutil.copyfile(noop, fixtures_tree / f"{noop.parent.parent.parent.name}__{noop.parent.name}.py")
    shutil.copytree(fixtures_tree, tmp_path / "plain")
    cache = tmp_path / "cache"
    checked = _run("check", "tree", cache=cache, cwd=tmp_path)
    with_findings = {f["path"] for f in checked["findings"]}
    known_clean = (checked["summary"]["files_unchanged"] - len(with_findings)
                   + checked["summary"]["skipped"])
    fixed = _run("fix", "tree", cache=cache, cwd=tmp_path)
    assert fixed["summary"]["cached"] == known_clean > 10
    plain = _run("fix", "plain", "--no-cache", cwd=tmp_path)
    assert (json.dumps(_without_cache_count(fixed)).replace("tree/", "plain/")
            == json.dumps(_without_cache_count(plain)))
    for path in fixtures_tree.rglob("*.py"):
        assert path.read_bytes() == (tmp_path / "plain" / path.relative_to(fixtures_tree)
                                     ).read_bytes(), path
    # the fixed files are checked afresh (and, where a fix changed a scan's facts, the
    # files that read them): the same report as an uncached check
    after = _run("check", "tree", cache=cache, cwd=tmp_path)
    plain_after = _run("check", "plain", "--no-cache", cwd=tmp_path)
    assert (json.dumps(_without_cache_count(after)).replace("tree/", "plain/")
            == json.dumps(_without_cache_count(plain_after)))
    assert 0 < after["summary"]["cached"] < after["summary"]["files_unchanged"]


def test_a_cached_survey_keeps_the_files_project_part(tmp_path):
    """The survey entry holds the file's part of the project model: a warm run joins the
    model from the cache, and a change in an imported file re-checks the file importing it."""
    (tmp_path / "model.py").write_text(
        "import tensorflow as tf\n"
        "def model(x):\n    return tf.layers.batch_normalization(x, training=True)\n")
    (tmp_path / "train.py").write_text(
        "import tensorflow as tf\nimport model\n"
        "train_op = tf.train.AdamOptimizer().minimize(tf.reduce_sum(model.model(x)))\n")
    cache = tmp_path / "cache"
    cold = _run("check", ".", cache=cache, cwd=tmp_path)
    assert [f["path"] for f in cold["findings"]] == ["train.py"]
    warm = _run("check", ".", cache=cache, cwd=tmp_path)
    assert warm["summary"]["cached"] == 2 and warm["findings"] == cold["findings"]
    (tmp_path / "model.py").write_text(
        "import tensorflow as tf\n"
        "def model(x):\n    return tf.layers.batch_normalization(x, training=False)\n")
    changed = _run("check", ".", cache=cache, cwd=tmp_path)
    assert changed["findings"] == [] and changed["summary"]["cached"] == 0


def test_a_third_party_codemods_file_is_part_of_the_key(tmp_path, monkeypatch):
    """Installed graphfix code is hashed as a whole; a transform from elsewhere by its files
    (its own and its codemod's, found without importing the codemod)."""
    from graphfix.source.cache import SourceCache

    codemod = tmp_path / "third_party_codemod.py"
    codemod.write_text("from graphfix.source.codemod import SourceCodemod\n\n"
                       "class Mine(SourceCodemod):\n    transform_name = 'mine'\n")
    transform = tmp_path / "third_party_transform.py"
    transform.write_text("from graphfix.registry import Transform\n\n"
                         "class Mine(Transform):\n    name = 'mine'\n"
                         "    codemod = 'third_party_codemod:Mine'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import third_party_transform

    def key():
        cache = SourceCache.open(tmp_path / "cache", [(third_party_transform.Mine, {})])
        return cache.result_key("m.py", BUG.encode(), BUG)

    before = key()
    assert key() == before
    assert "third_party_codemod" not in sys.modules
    codemod.write_text(codemod.read_text() + "# a change\n")
    after_codemod = key()
    assert after_codemod != before
    transform.write_text(transform.read_text() + "# a change\n")
    assert key() != after_codemod
    sys.modules.pop("third_party_transform", None)


def test_a_notebook_is_cached_by_its_cells(tmp_path):
    notebook = tmp_path / "towers.ipynb"
    shutil.copyfile(FIXTURES / "source_tree" / "notebooks" / "towers.ipynb", notebook)
    cache = tmp_path / "cache"
    cold = _run("check", "towers.ipynb", cache=cache, cwd=tmp_path)
    assert cold["findings"] and all(f["cell"] for f in cold["findings"])
    warm = _run("check", "towers.ipynb", cache=cache, cwd=tmp_path)
    assert warm["summary"]["cached"] == 1
    assert _without_cache_count(warm) == _without_cache_count(cold)
    fixed = _run("fix", "towers.ipynb", cache=cache, cwd=tmp_path)
    assert fixed["summary"]["files_changed"] == 1 and fixed["summary"]["cached"] == 0
    after = _run("check", "towers.ipynb", cache=cache, cwd=tmp_path)
    assert after["summary"]["cached"] == 0 and after["summary"]["fixable"] == 0


_LIBCST_LOADED = ("import sys\nfrom graphfix.cli.main import main\nsys.argv = ['graphfix', *sys.argv[1:]]\n"
                  "try:\n    main()\nexcept SystemExit as exit:\n    code = exit.code\n"
                  "print(code, 'libcst' in sys.modules)\n")


def _libcst_loaded(*args, cwd) -> tuple[str, str]:
    """(exit code, whether libcst was imported) of one in-process `graphfix` run."""
    result = subprocess.run([sys.executable, "-c", _LIBCST_LOADED, *map(str, args)], cwd=cwd,
                            capture_output=True, text=True, timeout=300)
    return tuple(result.stdout.split()[-2:])


def test_a_run_of_cached_or_filtered_files_never_imports_libcst(tmp_path):
    """libcst costs ~1 s to import: a second check, or a pre-commit run over files with no
    trigger words, answers from the cache and the text pre-filter alone."""
    (tmp_path / "bug.py").write_text(BUG)
    (tmp_path / "plain.py").write_text("import os\nprint(os.getcwd())\n")
    cache = tmp_path / "cache"
    # --jobs 1: the files are read in this process (worker processes would hide an import).
    run = ("check", "bug.py", "plain.py", "--jobs", "1", "--cache-dir", cache)
    assert _libcst_loaded(*run, cwd=tmp_path) == ("1", "True")
    assert _libcst_loaded(*run, cwd=tmp_path) == ("1", "False")
    assert _libcst_loaded("check", "plain.py", "--jobs", "1", "--no-cache",
                          cwd=tmp_path) == ("0", "False")


def test_a_warm_check_gives_the_fixes_as_text_from_the_cache(tmp_path):
    """`check --format json` carries each fix as text (`replacements`): the entry of a file
    with a fixable finding keeps the text `fix` writes, so a second run parses nothing. An
    entry a text check made has no such text: the first JSON run reads the file again."""
    (tmp_path / "bug.py").write_text(BUG)
    cache = tmp_path / "cache"
    text = ("check", "bug.py", "--jobs", "1", "--cache-dir", cache)
    assert _libcst_loaded(*text, cwd=tmp_path) == ("1", "True")
    assert _libcst_loaded(*text, cwd=tmp_path) == ("1", "False")
    as_json = (*text, "--format", "json")
    assert _libcst_loaded(*as_json, cwd=tmp_path) == ("1", "True")
    assert _libcst_loaded(*as_json, cwd=tmp_path) == ("1", "False")
    assert _libcst_loaded(*text, cwd=tmp_path) == ("1", "False")  # (the entry serves both)
    warm = _run("check", "bug.py", cache=cache, cwd=tmp_path)
    uncached = _run("check", "bug.py", "--no-cache", cwd=tmp_path)
    assert warm["summary"]["cached"] == 1
    assert warm["findings"][0]["replacements"]
    assert _without_cache_count(warm) == _without_cache_count(uncached)


def test_no_codemod_reads_other_files_but_through_the_project_model():
    """What other files say reaches a codemod only as the project model's answers
    (`SourceCodemod.project`): no transform declares a scan of its own any more."""
    from graphfix import registry

    for transform in registry.all_transforms().values():
        if transform.codemod is None:
            continue
        codemod = transform.source_codemod()
        assert not hasattr(codemod, "scan"), transform.name
        assert not hasattr(transform, "source_scan_triggers"), transform.name


def test_files_without_what_a_codemod_acts_on_never_load_libcst(tmp_path):
    """The syntax pre-check (stdlib `ast`, after the text pre-filter): trigger words in
    comments, strings and unrelated calls do not make a file worth libcst's time."""
    (tmp_path / "words.py").write_text(
        "import subprocess\n"
        "import tensorflow as tf\n"
        "# towers go on device '/gpu:0', jobs 'ps' and 'worker'\n"
        "with tf.device(chosen_device):  # a device held in a name is not followed\n"
        "    w = tf.Variable(1.0)\n"
        "subprocess.run(['nvidia-smi'])\n"
        "HELP = 'call minimize() or apply_gradients() yourself'\n")
    # update-ops: a train op, but no batch norm reaches it ("resnet" is only a word here,
    # the model it imports is not in the run): nothing to check.
    (tmp_path / "train.py").write_text(
        "import tensorflow as tf\n"
        "# a resnet without batch norm\n"
        "import model\n"
        "net = model.model(tf.layers.dense(x, 10))\n"
        "train_op = tf.train.AdamOptimizer().minimize(tf.reduce_sum(net))\n")
    assert _libcst_loaded("check", "words.py", "train.py", "--jobs", "1", "--no-cache",
                          cwd=tmp_path) == ("0", "False")
    # The same train op with the model it imports, which has a batch norm, is a finding (so
    # it was the missing batch norm, not the train op, that kept libcst away above).
    (tmp_path / "model.py").write_text(
        "import tensorflow as tf\n"
        "def model(x):\n    return tf.layers.batch_normalization(x, training=True)\n")
    both = _run("check", "train.py", "model.py", "--no-cache", cwd=tmp_path)
    assert [(f["path"], f["transform"]) for f in both["findings"]] == [("train.py", "update-ops")]


FED_ATTRIBUTE = ("import tensorflow as tf\n"
                 "class Trainer:\n"
                 "    def __init__(self):\n"
                 "        self.model = model.Model()\n"
                 "    def step(self, sess, value):\n"
                 "        sess.run(self.train_op, feed_dict={self.emb: value})\n"
                 "import model, other  # (what a fact about them needs to reach this file)\n")


def test_what_another_file_assigns_reaches_a_feed_through_imports(tmp_path):
    """feed-to-assign: `self.emb` is a variable because model.py, which the trainer
    imports, assigns one to `.emb` (other.py's variables are other names), and the model
    the trainer builds trains it; a trainer that imports neither knows nothing of them."""
    (tmp_path / "trainer.py").write_text(FED_ATTRIBUTE)
    (tmp_path / "model.py").write_text(
        "import tensorflow as tf\n"
        "class Model:\n"
        "    def __init__(self):\n"
        "        self.emb = tf.Variable(tf.zeros([10, 4]))\n"
        "        self.train_op = tf.train.AdamOptimizer().minimize(tf.reduce_sum(self.emb))\n")
    (tmp_path / "other.py").write_text(
        "import tensorflow as tf\n"
        "class Other:\n"
        "    def __init__(self):\n"
        "        self.weights = tf.Variable(tf.zeros([4]))\n"
        "        self.step = tf.assign_add(self.weights, tf.ones([4]))\n")
    cache = tmp_path / "cache"
    found = _run("check", ".", "--only", "feed-to-assign", cache=cache, cwd=tmp_path)
    assert [(f["path"], f["line"]) for f in found["findings"]] == [("trainer.py", 6)]
    (tmp_path / "alone").mkdir()
    (tmp_path / "alone" / "trainer.py").write_text(FED_ATTRIBUTE.rsplit("import", 1)[0])
    (tmp_path / "alone" / "model.py").write_text((tmp_path / "model.py").read_text())
    assert _run("check", "alone", "--only", "feed-to-assign", "--no-cache",
                cwd=tmp_path)["findings"] == []
    # Without model.py, nothing says `self.emb` is a variable: no finding.
    (tmp_path / "model.py").unlink()
    assert _run("check", ".", "--only", "feed-to-assign", "--no-cache",
                cwd=tmp_path)["findings"] == []


def _age(paths, days):
    then = time.time() - days * 86400
    for path in paths:
        os.utime(path, (then, then))


def test_entries_no_run_used_for_30_days_are_pruned_once_a_day(tmp_path):
    (tmp_path / "a.py").write_text(BUG)
    (tmp_path / "b.py").write_text(BUG.replace("step", "count"))
    args = ("a.py", "b.py", "--only", "variables-to-cpu")
    cache = tmp_path / "cache"
    _run("check", *args, cache=cache, cwd=tmp_path)
    version = _entries(cache)[0].relative_to(cache).parts[0]
    # 40 days on: b.py was edited since (its entries are no use), an older graphfix left
    # its folder, and the last sweep was long ago
    (tmp_path / "b.py").write_text(BUG.replace("step", "total"))
    older = cache / "0.0.1" / "ab" / ("c" * 62)
    older.parent.mkdir(parents=True)
    older.write_text("{}")
    _age([*_entries(cache), cache / ".pruned"], days=40)
    doc = _run("check", *args, cache=cache, cwd=tmp_path)
    assert doc["summary"]["cached"] == 1, "a.py's entries were there, and read"
    assert not (cache / "0.0.1").exists()
    fresh = tmp_path / "fresh"
    _run("check", *args, cache=fresh, cwd=tmp_path)
    names = [p.relative_to(cache) for p in _entries(cache)]
    assert names == [p.relative_to(fresh) for p in _entries(fresh)], \
        "what is left is what this tree needs: a.py's entries (used) and b.py's new ones"
    assert all(p.parts[0] == version for p in names)
    assert _run("check", *args, cache=cache, cwd=tmp_path)["summary"]["cached"] == 2
    # the next sweep waits a day: an unused entry stays until then
    unused = cache / version / "ab" / ("d" * 62)
    unused.parent.mkdir(exist_ok=True)
    unused.write_text("{}")
    _age([unused], days=40)
    _run("check", *args, cache=cache, cwd=tmp_path)
    assert unused.exists()
    _age([cache / ".pruned"], days=2)
    _run("check", *args, cache=cache, cwd=tmp_path)
    assert not unused.exists()


# -- TF's kernel registry: its answers are kept in the cache folder too ------------------------

SEED_GRAPH = FIXTURES / "variables_to_cpu" / "seed000_ref" / "before.pbtxt"
_CHECK_IN_PROCESS = """
import sys
from graphfix.cli.main import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print("TF loaded" if "tensorflow.python" in sys.modules else "TF not loaded", file=sys.stderr)
"""


def _check_seed(*extra, live=True):
    """`check` on the seed graph in a fresh process: (its JSON, whether TF was loaded).
    `live`: the installed TF's own registry, as for a TensorFlow the bundled table is not
    of (GRAPHFIX_LIVE_KERNELS)."""
    args = ["check", str(SEED_GRAPH), "--target-devices", "/gpu:0", "--format", "json", *extra]
    env = {**os.environ, "GRAPHFIX_CACHE_DIR": "", "GRAPHFIX_LIVE_KERNELS": "1" if live else ""}
    result = subprocess.run([sys.executable, "-c", _CHECK_IN_PROCESS, *args],
                            capture_output=True, text=True, timeout=300, env=env)
    return json.loads(result.stdout), result.stderr.strip().splitlines()[-1]


@pytest.mark.needs_tf  # (beside the installed TF's own registry)
def test_the_bundled_kernel_table_answers_without_tf(tmp_path):
    bundled, loaded = _check_seed("--no-cache", live=False)
    assert loaded == "TF not loaded"
    live, loaded = _check_seed("--no-cache")
    assert loaded == "TF loaded"
    import tensorflow as tf

    minor = ".".join(tf.__version__.split(".")[:2])
    assert bundled.pop("tensorflow") == {"version": minor, "source": "table"}
    assert live.pop("tensorflow") == {"version": tf.__version__, "source": "installed registry"}
    assert bundled == live


@pytest.mark.needs_tf  # (beside the installed TF's own registry)
def test_a_second_graph_check_asks_the_kept_registry_not_tf(tmp_path):
    cache = tmp_path / "cache"
    cold, loaded = _check_seed("--cache-dir", str(cache))
    assert loaded == "TF loaded"
    assert cold["findings"][0]["message"].startswith("Cannot assign a device for operation d")
    (snapshot,) = cache.glob("*/kernels/*.json")
    assert {"VariableV2", "Assign", "MatMul"} <= set(json.loads(snapshot.read_text())["kernels"])
    assert (cache / "CACHEDIR.TAG").exists() and (cache / ".gitignore").exists()
    warm, loaded = _check_seed("--cache-dir", str(cache))
    assert loaded == "TF not loaded"
    assert warm == cold
    _, loaded = _check_seed("--cache-dir", str(cache), "--no-cache")
    assert loaded == "TF loaded"


def test_the_kept_registry_answers_as_tf_does(tf, tmp_path):
    from graphfix.graph import kernels

    graph = tf.Graph()
    with graph.as_default(), tf.device("/gpu:0"):
        tf.compat.v1.Variable(2, name="count")  # int32: no GPU kernel
        tf.compat.v1.Variable(2.0, name="weight")
        tf.io.matching_files("*.ckpt", name="files")  # CPU only
    nodes = list(graph.as_graph_def().node)
    os.environ[kernels.LIVE_KERNELS_ENV] = "1"  # (as for a TF the bundled table is not of)
    kernels.use_snapshot(None)
    live = [(n.name, kernels.supports(n, "GPU"), kernels.supports(n, "CPU")) for n in nodes]
    assert ("count", False, True) in live and ("weight", True, True) in live
    try:
        kernels.use_snapshot(tmp_path)
        assert [(n.name, kernels.supports(n, "GPU"), kernels.supports(n, "CPU"))
                for n in nodes] == live  # learned from TF
        kernels.save_snapshot()
        (snapshot,) = tmp_path.glob("*/kernels/*.json")
        kernels.use_snapshot(tmp_path)
        assert [(n.name, kernels.supports(n, "GPU"), kernels.supports(n, "CPU"))
                for n in nodes] == live  # read back from the file
        assert not kernels._SNAPSHOT.learned, "every answer came from the file"
        snapshot.write_text("{not json")  # a damaged snapshot: asked anew, written anew
        kernels.use_snapshot(tmp_path)
        assert [(n.name, kernels.supports(n, "GPU"), kernels.supports(n, "CPU"))
                for n in nodes] == live
        kernels.save_snapshot()
        kept = json.loads(snapshot.read_text())
        assert {n.op for n in nodes} <= set(kept["kernels"])
        kept["kernels"] = {op: 5 for op in kept["kernels"]}  # hand-edited into nonsense
        snapshot.write_text(json.dumps(kept))
        kernels.use_snapshot(tmp_path)
        assert [(n.name, kernels.supports(n, "GPU"), kernels.supports(n, "CPU"))
                for n in nodes] == live
    finally:
        del os.environ[kernels.LIVE_KERNELS_ENV]
        kernels.use_snapshot(None)


def test_a_registry_without_gpu_kernels_is_said_plainly(tmp_path, capsys):
    """What a tensorflow-cpu install's registry holds, where it is asked (a TF graphfix has
    no table of; here GRAPHFIX_LIVE_KERNELS): no GPU kernel for any op. The check says so and
    stops (exit 2) rather than pass every group. (This TF has GPU kernels: the registry is
    one kept in the cache folder, of the shape `graphfix.graph.kernels` keeps.)"""
    from graphfix import __version__
    from graphfix.graph import kernels
    from graphfix.cli.main import main

    cpu_only = {"format": kernels._Snapshot.FORMAT, "defaults": {},
                "kernels": {op: [["CPU", "", []]] for op in ("MatMul", "VariableV2", "Assign",
                                                             "Const", "Identity", "AddV2")}}
    kept = tmp_path / __version__ / "kernels" / f"{kernels._install_fingerprint()}.json"
    kept.parent.mkdir(parents=True)
    kept.write_text(json.dumps(cpu_only))
    import tensorflow as tf

    said = (f"graphfix: error: the installed TensorFlow {tf.__version__} registers no GPU "
            "kernels (a tensorflow-cpu install?), so GPU placement cannot be checked against "
            "it; name the TensorFlow the graph will run on with --tf-version (graphfix has "
            f"tables of {', '.join(kernels.shipped_versions())})\n")
    result = run_cli("check", SEED_GRAPH, "--target-devices", "/gpu:0", "--cache-dir", tmp_path,
                     check_exit=2, env={kernels.LIVE_KERNELS_ENV: "1"})
    assert (result.stdout, result.stderr) == ("", said)
    # ... and the shipped table of a version has them: --tf-version checks GPU placement
    named = run_cli("check", SEED_GRAPH, "--target-devices", "/gpu:0", "--cache-dir", tmp_path,
                    "--tf-version", kernels.shipped_versions()[-1], check_exit=1,
                    env={kernels.LIVE_KERNELS_ENV: "1"})
    assert "Cannot assign a device for operation d" in named.stdout
    # verify asks the same registry (here, the one kept) before it runs anything
    os.environ[kernels.LIVE_KERNELS_ENV] = "1"
    try:
        kernels.use_snapshot(tmp_path)
        with pytest.raises(SystemExit) as stopped:
            main(["verify", str(SEED_GRAPH)])
    finally:
        del os.environ[kernels.LIVE_KERNELS_ENV]
        kernels.use_snapshot(None)
        kernels._SNAPSHOT.kernels.clear()  # (the CPU-only answers are not this TF's)
        kernels._kernels_for.cache_clear()
    assert stopped.value.code == 2
    assert capsys.readouterr() == ("", said)
