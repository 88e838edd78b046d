"""Every repository path the documentation names exists in the checkout.

The documentation is ``README.md``, ``docs/*.md``, the role READMEs (``roles/*/README.md``; their variable tables
come from the argument specs and defaults, so a path there is checked in its source too), and the plugins' own
documentation (the ``DOCUMENTATION``, ``EXAMPLES`` and ``RETURN`` of ``plugins/modules/*.py`` and
``plugins/doc_fragments/*.py``, the filters' ``plugins/filter/*.yml``). Three kinds of path are checked:

* a **repository path**: a word that starts with one of the checkout's top-level folders (``TOP``: ``playbooks/``,
  ``roles/``, ``plugins/``, ...) and is not part of a longer path (not preceded by ``/``, ``.``, ``~`` or a word
  character), such as ``plugins/module_utils/storage/mvp_job.py`` or ``roles/job_controller/``. Paths inside a job
  directory or a node (``logs/status.json``, ``config/job_spec.json``, ``/private/jobs/...``,
  ``<shared_root>/ray/plays``) start with no such folder and are not repository paths; a path with a placeholder
  or a pattern (``roles/<role>/defaults/main.yml``, ``roles/*/README.md``, ``plugins/{modules,filter}/``) is
  skipped, and so is one under a folder ``.gitignore`` keeps out (``bench/results/``, written by the benchmarks) or
  an example of a path a user makes (``NOT_IN_CHECKOUT``);
* a **role path** in a role's README: a word starting with one of a role's folders (``defaults/``, ``tasks/``,
  ``files/``, ...), from that role's folder;
* a **Markdown link** ``[text](target)`` of a ``.md`` file whose target is relative: the file it names, from the
  linking file's folder, and its ``#anchor`` (a heading of that file, as GitHub makes anchors from headings).
"""
import ast
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# The checkout's top-level folders a path in the documentation may start with. ``meta/`` is left out: role READMEs
# name their own ``meta/argument_specs.yml`` relative to the role.
TOP = ("bench", "changelogs", "docs", "images", "inventories", "jobspecs", "molecule", "playbooks", "plugins",
       "roles", "scripts", "tests")

# A path: a top-level folder, '/', then path characters; not the tail of a longer path or word, nor a Markdown
# link's target (relative to the linking file: checked as a link).
PATH_RE = re.compile(r"(?<![\w./~<>-])(?<!\]\()(?:%s)/[\w.+/-]*" % "|".join(TOP))
# The folders of a role a role's README names relative to the role (``defaults/main.yml``, ``files/requirements.txt``).
ROLE_PATH_RE = re.compile(r"(?<![\w./~<>-])(?<!\]\()(?:defaults|files|handlers|meta|tasks|templates|vars)/[\w.+/-]*")
# Paths the documentation names that are not in the checkout on purpose: prefix -> why.
NOT_IN_CHECKOUT = {
    "inventories/mine": "README.md's example of a site's own inventory, made with cp -r inventories/prod",
}
# A character right after a match that makes it a placeholder or a pattern, not a path.
PLACEHOLDER_NEXT = ("<", "*", "{", "$", "[")
# A Markdown link or image: [text](target) with no spaces in the target.
LINK_RE = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
# Fenced code blocks: their text is checked for paths, never for links or headings.
FENCE_RE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)


def _markdown_files():
    files = [os.path.join(ROOT, "README.md")]
    files += sorted(os.path.join(ROOT, "docs", n) for n in os.listdir(os.path.join(ROOT, "docs")) if n.endswith(".md"))
    roles = os.path.join(ROOT, "roles")
    files += sorted(os.path.join(roles, r, "README.md") for r in os.listdir(roles)
                    if os.path.isfile(os.path.join(roles, r, "README.md")))
    return files


def _plugin_doc_texts():
    """(file, text) of every plugin documentation string and filter documentation file."""
    texts = []
    for folder in ("plugins/modules", "plugins/doc_fragments"):
        for name in sorted(os.listdir(os.path.join(ROOT, folder))):
            if not name.endswith(".py"):
                continue
            path = os.path.join(ROOT, folder, name)
            with open(path, encoding="utf-8") as handle:
                tree = ast.parse(handle.read(), path)
            for node in ast.walk(tree):
                if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(
                        node.value.value, str) and any(getattr(t, "id", "") in ("DOCUMENTATION", "EXAMPLES", "RETURN")
                                                       for t in node.targets):
                    texts.append((path, node.value.value))
    folder = os.path.join(ROOT, "plugins", "filter")
    for name in sorted(os.listdir(folder)):
        if name.endswith(".yml"):
            with open(os.path.join(folder, name), encoding="utf-8") as handle:
                texts.append((os.path.join(folder, name), handle.read()))
    return texts


def _documents():
    """(file relative to the checkout, text) of every document, a plugin's strings joined."""
    docs = {}
    for path in _markdown_files():
        with open(path, encoding="utf-8") as handle:
            docs[path] = handle.read()
    for path, text in _plugin_doc_texts():
        docs[path] = docs.get(path, "") + "\n" + text
    return sorted((os.path.relpath(path, ROOT), text) for path, text in docs.items())


DOCUMENTS = _documents()


def _ignored_folders():
    """The folders ``.gitignore`` keeps out of the checkout from its root (``/bench/results/``: generated output)."""
    with open(os.path.join(ROOT, ".gitignore"), encoding="utf-8") as handle:
        return tuple(line.strip()[1:] for line in handle if re.match(r"^/[\w./-]+/\s*$", line))


def missing_paths(text):
    """The repository paths ``text`` names that are not in the checkout (sorted list of str): neither a file or
    folder, nor under a folder git ignores, nor a ``NOT_IN_CHECKOUT`` example."""
    ignored = _ignored_folders() + tuple(NOT_IN_CHECKOUT)
    return sorted({p for p in repository_paths(text) if not os.path.exists(os.path.join(ROOT, p))
                   and not any(p == i.rstrip("/") or p.startswith(i.rstrip("/") + "/") for i in ignored)})


def repository_paths(text, pattern=PATH_RE):
    """The repository paths ``text`` names (list of str, each as written, trailing punctuation removed)."""
    found = []
    for match in pattern.finditer(text):
        following = text[match.end():match.end() + 1]
        path = match.group(0).rstrip(".")
        if following in PLACEHOLDER_NEXT or path.endswith("-") or "..." in match.group(0):
            continue
        found.append(path)
    return found


def anchor(heading):
    """The anchor GitHub gives a Markdown heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`|\*\*|\[([^\]]*)\]\([^)]*\)", lambda m: m.group(1) or "", heading.strip()).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path):
    """Every anchor of the Markdown file ``path`` (a repeated heading gets ``-1``, ``-2``, ... as on GitHub)."""
    with open(path, encoding="utf-8") as handle:
        text = FENCE_RE.sub("", handle.read())
    seen, out = {}, set()
    for line in text.splitlines():
        heading = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if heading:
            slug = anchor(heading.group(1))
            out.add(slug if slug not in seen else "%s-%d" % (slug, seen[slug]))
            seen[slug] = seen.get(slug, 0) + 1
    return out


def test_the_path_pattern_takes_repository_paths_only():
    text = ("see `plugins/module_utils/storage/mvp_job.py`, [x](../../docs/jobs.md#a), roles/job_controller/. and "
            "`logs/status.json`, /private/jobs/x, <shared_root>/ray/plays, roles/<role>/defaults/main.yml, "
            "roles/*/README.md, plugins/{modules,filter}/x, a/docs/y.md, ~/tests/z, images/node/build.sh:4")
    assert repository_paths(text) == ["plugins/module_utils/storage/mvp_job.py", "roles/job_controller/",
                                      "images/node/build.sh"]


def test_a_named_path_is_missing_unless_it_exists_is_ignored_by_git_or_an_example():
    text = "docs/jobs.md, bench/results/x.json, inventories/mine/hosts.yml, roles/none/README.md, docs/none.md"
    assert missing_paths(text) == ["docs/none.md", "roles/none/README.md"]


def test_anchors_are_made_as_github_makes_them(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("# What it does\n## 8 to 64 nodes over SSH\n```\n# not a heading\n```\n"
                    "## `submit.yml`, then **wait**\n## What it does\n")
    assert anchors(str(page)) == {"what-it-does", "8-to-64-nodes-over-ssh", "submityml-then-wait", "what-it-does-1"}


@pytest.mark.parametrize("name", [name for name, _ in DOCUMENTS])
def test_every_repository_path_the_documentation_names_exists(name):
    assert missing_paths(dict(DOCUMENTS)[name]) == [], "%s names paths that are not in the checkout" % name


@pytest.mark.parametrize("name", [name for name, _ in DOCUMENTS if name.startswith("roles/")])
def test_every_path_a_role_readme_names_in_its_role_exists(name):
    role = os.path.join(ROOT, os.path.dirname(name))
    missing = sorted({p for p in repository_paths(dict(DOCUMENTS)[name], ROLE_PATH_RE)
                      if not os.path.exists(os.path.join(role, p))})
    assert missing == [], "%s names paths that are not in its role" % name


@pytest.mark.parametrize("path", _markdown_files(), ids=lambda v: os.path.relpath(v, ROOT))
def test_every_relative_markdown_link_leads_to_a_file_and_heading(path):
    with open(path, encoding="utf-8") as handle:
        text = FENCE_RE.sub("", handle.read())
    broken = []
    for target in LINK_RE.findall(text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("/"):
            continue  # a URL (https:, mailto:), or an absolute path on a machine
        name, _, fragment = target.partition("#")
        where = os.path.normpath(os.path.join(os.path.dirname(path), name)) if name else path
        if not os.path.exists(where):
            broken.append(target)
        elif fragment and where.endswith(".md") and fragment not in anchors(where):
            broken.append(target)
    assert broken == [], "%s links to missing files or headings" % os.path.relpath(path, ROOT)
