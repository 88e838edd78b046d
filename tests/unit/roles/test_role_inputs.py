"""One public name per setting (docs/collection.md, "Role inputs"): a role's own knobs are named after the
role, declared once in its defaults/main.yml and meta/argument_specs.yml and set in the inventory by that name;
the facts several roles share are mvp_* names of inventories/common/all, declared by each role that reads them.
No value is written twice and no play reads a setting nobody declares."""
import glob
import json
import os
import re
import shutil
import subprocess
import sys

import jinja2
import jinja2.meta
import pytest
import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
ROLES = sorted(os.path.basename(os.path.dirname(p)) for p in glob.glob(os.path.join(ROOT, "roles", "*", "meta")))
MAPPINGS = os.path.join(ROOT, "playbooks", "vars")
COMMON = os.path.join(ROOT, "inventories", "common", "all")
# Names a role may read besides its own (prefixed) variables: Ansible's magic variables and loop names.
MAGIC = {"inventory_hostname", "hostvars", "ansible_failed_result", "ansible_failed_task", "ansible_check_mode", "ansible_play_hosts", "ansible_play_hosts_all",
         "ansible_connection", "ansible_playbook_python", "role_path", "playbook_dir", "inventory_dir", "item",
         "ansible_inventory_sources", "groups", "ansible_host", "ansible_facts", "ansible_user", "ansible_env",
         "omit", "loop", "true", "false", "none", "True", "False", "None"}
# Names the command line sets (-e): only the plays map them (playbooks/vars/, play vars).
COMMAND_LINE = {"wait", "repeat", "repeat_mode", "group", "last", "workload", "jobspec", "submission_id", "submission_ids",
                "baseline", "fail_on_regression", "report_id", "diff_max_lines", "diff_max_bytes",
                "mvp_down_purge_confirm", "queue", "since", "until", "by"}
# Per-host facts of the inventory (hosts.yml), read through hostvars by the containers role's plan.
PER_HOST = {"mvp_container_name", "mvp_container_gpus"}
# Facts other roles set and declare as their outputs (the head's IP, the image the docker host built).
OUTPUTS = {"ray_head_ip", "ray_head_worker_ips", "docker_host_node_image_ref", "docker_host_engine",
           "running_jobs_auth_mode"}
CONDITIONS = ("when", "that", "failed_when", "changed_when", "until")


class _Any(dict):
    """Every filter and test name exists (Ansible's and the collection's: only the names read matter)."""

    def __contains__(self, name):
        return True

    def __missing__(self, name):
        return lambda *args, **kwargs: None

    def get(self, name, default=None):
        return self[name]


ENV = jinja2.Environment(extensions=["jinja2.ext.loopcontrols", "jinja2.ext.do"])
ENV.filters = _Any(ENV.filters)
ENV.tests = _Any(ENV.tests)
ENV.globals.update({name: None for name in ("lookup", "query", "q", "now", "range", "dict", "undef")})


def load(path):
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def names(template):
    """The variables a Jinja template reads (its own set/loop/macro names excluded)."""
    return jinja2.meta.find_undeclared_variables(ENV.parse(template))


def expressions(node, key=None):
    """Yield every Jinja template in a loaded YAML tree: strings with {{ or {%, and bare conditions."""
    if isinstance(node, dict):
        for k, value in node.items():
            yield from expressions(value, k)
    elif isinstance(node, list):
        for value in node:
            yield from expressions(value, key)
    elif isinstance(node, str):
        if "{{" in node or "{%" in node:
            yield node
        elif key in CONDITIONS:
            yield "{{ %s }}" % node


def role_reads(role):
    """{file: names read} over the role's defaults, vars, tasks and templates."""
    found = {}
    base = os.path.join(ROOT, "roles", role)
    for path in sorted(glob.glob(os.path.join(base, "*", "*.yml"))):
        if os.path.basename(os.path.dirname(path)) not in ("defaults", "vars", "tasks"):
            continue
        found[os.path.relpath(path, ROOT)] = set().union(*(names(t) for t in expressions(load(path)))) or set()
    for path in sorted(glob.glob(os.path.join(base, "templates", "*"))):
        with open(path, encoding="utf-8") as handle:
            found[os.path.relpath(path, ROOT)] = names(handle.read())
    return found


def specs(role):
    """{option: [its declarations, one per entry point]} of the role's meta/argument_specs.yml."""
    options = {}
    for entry in load(os.path.join(ROOT, "roles", role, "meta", "argument_specs.yml"))["argument_specs"].values():
        for name, spec in (entry.get("options") or {}).items():
            options.setdefault(name, []).append(spec)
    return options


def plays():
    """Yield (path, play) for every play of the playbooks and the molecule scenarios."""
    paths = glob.glob(os.path.join(ROOT, "playbooks", "*.yml")) + glob.glob(os.path.join(ROOT, "*.yml"))
    paths += glob.glob(os.path.join(ROOT, "molecule", "**", "*.yml"), recursive=True)
    for path in sorted(paths):
        content = load(path)
        if isinstance(content, list):
            for play in content:
                if isinstance(play, dict) and "hosts" in play:
                    yield path, play


def included_roles(node):
    """Roles a list of tasks (blocks included) runs by include_role/import_role."""
    found = set()
    if isinstance(node, list):
        for item in node:
            found |= included_roles(item)
    elif isinstance(node, dict):
        for key, value in node.items():
            if key.split(".")[-1] in ("include_role", "import_role") and isinstance(value, dict):
                found.add(value["name"].split(".")[-1])
            elif key in ("block", "rescue", "always", "tasks", "pre_tasks", "post_tasks", "handlers"):
                found |= included_roles(value)
    return found


def role_closure(roles):
    """The roles given and every role their task files include, transitively."""
    todo, seen = list(roles), set()
    while todo:
        role = todo.pop()
        if role in seen:
            continue
        seen.add(role)
        for path in glob.glob(os.path.join(ROOT, "roles", role, "tasks", "*.yml")):
            todo.extend(included_roles(load(path)))
    return seen


def common_settings():
    """{name: value} of inventories/common/all: the facts several roles share."""
    found = {}
    for path in sorted(glob.glob(os.path.join(COMMON, "*.yml"))):
        found.update(load(path) or {})
    return found


def knobs():
    """{role knob: its role} - every option a role declares under its own prefix."""
    return {name: role for role in ROLES for name in specs(role) if name.startswith(role + "_")}


def run_by(role):
    """The roles a role's task files include (their declared outputs it may read)."""
    runs = set()
    for path in glob.glob(os.path.join(ROOT, "roles", role, "tasks", "*.yml")):
        runs |= included_roles(load(path))
    return runs - {role}


@pytest.mark.parametrize("role", ROLES)
def test_a_role_reads_its_own_knobs_and_the_shared_facts_it_declares(role):
    declared = set(specs(role))
    shared = set(common_settings())
    own = (role,) + tuple(sorted(run_by(role)))
    foreign = {}
    for path, read in role_reads(role).items():
        bad = sorted(n for n in read if n in COMMAND_LINE or not (
            n in own or n.startswith(tuple(r + "_" for r in own)) or n in MAGIC or n in PER_HOST or n in OUTPUTS
            or (n in shared and n in declared)))
        if bad:
            foreign[path] = bad
    assert foreign == {}, "read but neither the role's own nor a shared fact it declares in meta/argument_specs.yml"


@pytest.mark.parametrize("role", ROLES)
def test_every_knob_is_declared_once_with_its_default_and_every_shared_fact_is_required(role):
    defaults = load(os.path.join(ROOT, "roles", role, "defaults", "main.yml")) or {}
    shared = common_settings()
    wrong = {}
    for name, declarations in specs(role).items():
        for spec in declarations:
            if name.startswith("mvp_"):
                if name not in shared or name in defaults or "default" in spec or not spec.get("required"):
                    wrong[name] = "a shared fact: required, no default, set in inventories/common/all only"
            elif spec.get("required") and "default" not in spec:
                continue  # a required input (the entry point's caller sets it): its default is only a placeholder
            elif name not in defaults:
                wrong[name] = "declared, not in defaults/main.yml"
            elif "{{" in str(defaults[name]):
                if "default" in spec:
                    wrong[name] = "derived in defaults/main.yml: argument_specs gives no second default"
            elif spec.get("default") != defaults[name]:
                wrong[name] = "argument_specs default %r, defaults/main.yml %r" % (spec.get("default"), defaults[name])
    assert wrong == {}
    assert sorted(set(defaults) - set(specs(role))) == []
    assert all(name.startswith(role + "_") for name in defaults)
    internal = os.path.join(ROOT, "roles", role, "vars", "main.yml")
    if os.path.exists(internal):
        # Role vars beat every play's vars: an input there could never be set.
        assert sorted(set(load(internal)) & set(specs(role))) == []


def test_the_common_settings_are_shared_facts_only():
    """inventories/common/all holds mvp_* facts that two roles, a play or another fact read - never a role's knob."""
    shared = common_settings()
    readers = {name: set() for name in shared}
    for role in ROLES:
        for name in specs(role):
            if name in readers:
                readers[name].add("role " + role)
    for path in glob.glob(os.path.join(ROOT, "playbooks", "*.yml")) + glob.glob(os.path.join(ROOT, "playbooks", "templates", "*")):
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        for name in readers:
            if re.search(r"\b%s\b" % name, text):
                readers[name].add(os.path.relpath(path, ROOT))
    for name, value in shared.items():
        for other in set().union(*(names(t) for t in expressions(value))) & set(readers):
            readers[other].add("fact " + name)
    assert sorted(n for n in shared if not n.startswith("mvp_")) == []
    assert sorted(n for n in shared if n in knobs()) == []
    lonely = {n: sorted(r) for n, r in readers.items() if len(r) < 2 and not any(x.startswith(("playbooks/", "fact ")) for x in r)
              and n not in PER_HOST}
    assert lonely == {}, "read by one role only: make it that role's knob"


def inventory_files():
    """Every inventory variables file of the shipped inventories and the molecule scenarios (group_vars, hosts)."""
    paths = glob.glob(os.path.join(ROOT, "inventories", "*", "group_vars", "**", "*.yml"), recursive=True)
    paths += glob.glob(os.path.join(ROOT, "molecule", "*", "inventory", "group_vars", "**", "*.yml"), recursive=True)
    return sorted(p for p in paths if os.path.realpath(p).startswith(os.path.realpath(COMMON)) is False)


def test_no_inventory_repeats_a_role_default():
    """A value is written once: an inventory sets a role knob or a shared fact only to another value than the
    role's default or inventories/common/all."""
    owner = knobs()
    shared = common_settings()
    repeated = []
    for path in inventory_files():
        for name, value in (load(path) or {}).items():
            if name in shared and value == shared[name]:
                repeated.append("%s: %s (as inventories/common/all sets it)" % (os.path.relpath(path, ROOT), name))
            if name in owner:
                default = (load(os.path.join(ROOT, "roles", owner[name], "defaults", "main.yml")) or {})[name]
                if value == default:
                    repeated.append("%s: %s (the default of role %s)" % (os.path.relpath(path, ROOT), name, owner[name]))
    assert repeated == []


PURE_RENAME = re.compile(r"^\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}$")


def test_no_mapping_only_renames_a_setting():
    """playbooks/vars/ and the plays' vars map the command line only: a line that only renames another setting fails."""
    renames = []
    for path in sorted(glob.glob(os.path.join(MAPPINGS, "*.yml"))):
        for name, value in (load(path) or {}).items():
            match = PURE_RENAME.match(value) if isinstance(value, str) else None
            if match and match.group(1) not in COMMAND_LINE:
                renames.append("%s: %s" % (os.path.relpath(path, ROOT), name))
            if not (set(names(value) if isinstance(value, str) else set()) & COMMAND_LINE):
                renames.append("%s: %s maps no command-line name" % (os.path.relpath(path, ROOT), name))
    for path, play in plays():
        for name, value in (play.get("vars") or {}).items():
            match = PURE_RENAME.match(value) if isinstance(value, str) else None
            if match and match.group(1) not in COMMAND_LINE and match.group(1) not in MAGIC:
                renames.append("%s (%s): %s" % (os.path.relpath(path, ROOT), play.get("name"), name))
    assert renames == []


def play_reads(node):
    """Names the play's own expressions read (hosts, vars, environment, tasks; roles' own files excluded)."""
    found = set()
    for template in expressions(node):
        found |= names(template)
    return found


def play_sets(node):
    """Names a play sets itself: vars, registered results, set_fact keys, loop_var, include params."""
    found = set()
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "register" and isinstance(value, str):
                found.add(value)
            elif key in ("vars", "ansible.builtin.set_fact", "set_fact") and isinstance(value, dict):
                found |= set(value)
            elif key == "loop_control" and isinstance(value, dict) and value.get("loop_var"):
                found.add(value["loop_var"])
            found |= play_sets(value)
    elif isinstance(node, list):
        for value in node:
            found |= play_sets(value)
    return found


def test_a_play_reads_only_settings_that_are_declared():
    """Every name a play reads is a shared fact, a knob or output of a role it runs, the command line's, or its own."""
    shared = set(common_settings())
    undeclared = {}
    for path, play in plays():
        if "/molecule/" in path:
            continue
        roles = {(r["role"] if isinstance(r, dict) else r).split(".")[-1] for r in play.get("roles") or []}
        roles = role_closure(roles | included_roles(play))
        prefixes = tuple(r + "_" for r in ROLES)  # a role's outputs (facts) carry its prefix too
        own = play_sets(play) | set((play.get("vars") or {}))
        for vars_file in play.get("vars_files") or []:
            own |= set(load(os.path.normpath(os.path.join(os.path.dirname(path), vars_file))) or {})
        declared = set().union(*(set(specs(r)) for r in roles)) if roles else set()
        bad = sorted(n for n in play_reads(play) - own - MAGIC - COMMAND_LINE - shared - PER_HOST - declared
                     if not n.startswith(prefixes))
        if bad:
            undeclared["%s (%s)" % (os.path.relpath(path, ROOT), play.get("name"))] = bad
    assert undeclared == {}


def scenario_variables(scenario):
    """Names a molecule scenario's inventory sets (its group_vars and hosts.yml, the common settings linked in)."""
    found = set()
    for path in glob.glob(os.path.join(ROOT, "molecule", scenario, "inventory", "**", "*.yml"), recursive=True):
        content = load(path)
        stack = [content]
        while stack:  # hosts.yml nests host and group vars under hosts/children/vars
            node = stack.pop()
            if isinstance(node, dict):
                found |= set(node)
                stack.extend(node.values())
    return found


def test_a_molecule_play_reads_a_role_knob_only_where_it_is_set():
    """A verify/converge/destroy play outside a role sees a role's knob only when the scenario's inventory or the play
    sets it (its default lives in the role): reading it there would be undefined."""
    owner = knobs()
    undefined = {}
    for path in sorted(glob.glob(os.path.join(ROOT, "molecule", "**", "*.yml"), recursive=True)):
        rel = os.path.relpath(path, ROOT)
        if "/inventory/" in rel or rel.endswith("molecule.yml"):
            continue
        scenario = rel.split(os.sep)[1]
        content = load(path)
        given = play_sets(content) | (scenario_variables(scenario) if scenario != "shared" else set())
        if scenario == "shared":  # shared files run in every scenario: a knob must be set in all of them
            scenarios = [s for s in os.listdir(os.path.join(ROOT, "molecule")) if os.path.isdir(os.path.join(ROOT, "molecule", s, "inventory"))]
            given |= set.intersection(*(scenario_variables(s) for s in scenarios))
        bad = set()
        for template in expressions(content):
            for name in names(template) & set(owner):
                if name not in given and not re.search(r"\b%s\s*\|\s*default\(" % name, template):
                    bad.add(name)
        if bad:
            undefined[rel] = sorted(bad)
    assert undefined == {}


# --- The mappings against the shipped inventories (Ansible's own inventory, variables and templating).
# Rendered in a fresh Python (this file run as a script): the unit tests put collections/ on sys.path,
# which keeps Ansible's collection loader from finding the collection's filters in this process.

def trusted(value, trust):
    if isinstance(value, str):
        return trust(value)
    if isinstance(value, dict):
        return {k: trusted(v, trust) for k, v in value.items()}
    if isinstance(value, list):
        return [trusted(v, trust) for v in value]
    return value


def _render(inventory, extra):
    """{"host|role": {input: value}} - each role's inputs (its defaults under the inventory, the command line's
    mapping, the shared facts it declares) templated with each host's variables of ``inventory`` (a folder)."""
    from ansible.plugins.loader import init_plugin_loader
    init_plugin_loader()
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar, trust_as_template
    from ansible.vars.hostvars import HostVars
    from ansible.vars.manager import VariableManager
    loader = DataLoader()
    inv = InventoryManager(loader, sources=[inventory])
    manager = VariableManager(loader, inv)
    manager._hostvars = HostVars(inventory=inv, variable_manager=manager, loader=loader)  # pylint: disable=protected-access
    result = {}
    for host in inv.get_hosts():
        host_variables = manager.get_vars(host=host, include_hostvars=True)
        for role in ROLES:
            defaults = trusted(load(os.path.join(ROOT, "roles", role, "defaults", "main.yml")), trust_as_template)
            variables = dict(defaults)
            variables.update(host_variables)  # the inventory beats the role's defaults
            if os.path.exists(os.path.join(MAPPINGS, role + ".yml")):  # the command line's names
                variables.update(trusted(load(os.path.join(MAPPINGS, role + ".yml")), trust_as_template))
            variables.update(extra)
            variables.update(role_path=os.path.join(ROOT, "roles", role), playbook_dir=os.path.join(ROOT, "playbooks"))
            render = Templar(loader, variables=variables)
            inputs = set(defaults) | set(specs(role))
            result["%s|%s" % (host.name, role)] = {name: render.template(variables[name]) for name in inputs if name in variables}
    return result


def render_inputs(inventory, extra=None):
    """{(host, role): {input: value}} from _render in a fresh Python."""
    proc = subprocess.run([sys.executable, __file__, inventory, json.dumps(extra or {})], cwd=ROOT,
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {tuple(key.split("|")): values for key, values in json.loads(proc.stdout).items()}


@pytest.mark.parametrize("inventory", ["local", "dev", "prod"])
def test_every_role_input_renders_for_every_host_of_a_shipped_inventory_and_passes_the_role_spec(inventory):
    from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
    extra = {"workload": "sft", "last": "3", "fail_on_regression": "true", "diff_max_lines": "50"}
    rendered = render_inputs(os.path.join(ROOT, "inventories", inventory), extra)
    for (host, role), values in rendered.items():
        options = {name: {k: v for k, v in declared[0].items() if k in ("type", "elements", "no_log", "choices")}
                   for name, declared in specs(role).items()}
        missing = sorted(set(n for n, d in specs(role).items() if d[0].get("required")) - set(values))
        assert missing == [], (host, role)
        result = ArgumentSpecValidator(options).validate(values)
        assert result.error_messages == [], (host, role)
    # The command line's names reach the role (report.yml -e workload=sft -e last=3).
    sample = next(v for (h, r), v in rendered.items() if r == "run_report")
    assert (sample["run_report_workload"], str(sample["run_report_last"])) == ("sft", "3")
    # A knob the inventory sets by its role's name reaches that role; the others keep the role's default.
    env = os.path.join(ROOT, "inventories", inventory, "group_vars", "all")
    given = {}
    for path in sorted(glob.glob(os.path.join(env, "*.yml"))):
        if not os.path.realpath(path).startswith(os.path.realpath(COMMON)):
            given.update(load(path) or {})
    owner = knobs()
    for name, value in given.items():
        if name in owner and "{{" not in str(value):
            seen = {h: v[name] for (h, r), v in rendered.items() if r == owner[name]}
            assert set(map(str, seen.values())) == {str(value)}, name


if __name__ == "__main__":
    json.dump(_render(sys.argv[1], json.loads(sys.argv[2])), sys.stdout)
