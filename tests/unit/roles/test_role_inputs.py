"""Role inputs: literal defaults, declared with the same default, read by the role alone; the shipped
playbooks map the inventory's mvp_* settings to them in playbooks/vars/<role>.yml, loaded by every play
that runs the role (docs/collection.md, "Role inputs")."""
import glob
import json
import os
import shutil
import subprocess
import sys

import jinja2
import jinja2.meta
import pytest
import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
ROLES = sorted(os.path.basename(os.path.dirname(p)) for p in glob.glob(os.path.join(ROOT, "roles", "*", "meta")))
# Converted on their own (issue 39 item 4, same change): drop a role from here once its
# playbooks/vars/<role>.yml exists and it reads no mvp_* setting.
NOT_YET = set()
CONVERTED = [role for role in ROLES if role not in NOT_YET]
MAPPINGS = os.path.join(ROOT, "playbooks", "vars")
# Names a role may read besides its own (prefixed) variables: Ansible's magic variables and loop names.
MAGIC = {"inventory_hostname", "hostvars", "ansible_failed_result", "ansible_failed_task", "ansible_check_mode", "ansible_play_hosts", "ansible_play_hosts_all",
         "ansible_connection", "ansible_playbook_python", "role_path", "playbook_dir", "inventory_dir", "item",
         "ansible_inventory_sources",
         "omit", "loop", "true", "false", "none", "True", "False", "None"}
# Names the command line sets (-e) and the groups of the shipped inventories: the mappings' business.
COMMAND_LINE = {"wait", "repeat", "group", "last", "workload", "jobspec", "submission_id", "submission_ids",
                "baseline", "fail_on_regression", "report_id", "diff_max_lines", "diff_max_bytes", "groups",
                "controller_restart", "lost_with_head"}
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


@pytest.mark.parametrize("role", CONVERTED)
def test_a_role_reads_only_its_own_variables(role):
    foreign = {}
    # A role may also read the declared outputs of the roles it runs itself (running_jobs' guard reads
    # containers_change, ray_head_change, ... of the probes it includes).
    runs = set()
    for path in glob.glob(os.path.join(ROOT, "roles", role, "tasks", "*.yml")):
        runs |= included_roles(load(path))
    own = (role,) + tuple(sorted(runs - {role}))
    for path, read in role_reads(role).items():
        bad = sorted(n for n in read if n.startswith("mvp_") or n in COMMAND_LINE
                     or not (n in own or n.startswith(tuple(r + "_" for r in own)) or n in MAGIC))
        if bad:
            foreign[path] = bad
    assert foreign == {}


@pytest.mark.parametrize("role", CONVERTED)
def test_every_default_is_declared_with_the_same_default_and_no_internal_one_is(role):
    defaults = load(os.path.join(ROOT, "roles", role, "defaults", "main.yml")) or {}
    declared = specs(role)
    wrong = {}
    for name, value in defaults.items():
        for spec in declared.get(name, [None]):
            if spec is None:
                wrong[name] = "not declared"
            elif spec.get("required") and "default" not in spec:
                continue  # a required input: its default is only a placeholder
            elif "default" not in spec and "{{" in str(value) and spec.get("type") in ("bool", "list"):
                continue  # derived from the role's other inputs, not a bool or list the docs could show
            elif spec.get("default") != value:
                wrong[name] = "argument_specs default %r, defaults/main.yml %r" % (spec.get("default"), value)
    assert wrong == {}
    assert sorted(set(declared) - set(defaults)) == []
    internal = os.path.join(ROOT, "roles", role, "vars", "main.yml")
    if os.path.exists(internal):
        # Role vars beat every play's vars: an input there could never be set.
        assert sorted(set(load(internal)) & set(declared)) == []


@pytest.mark.parametrize("role", CONVERTED)
def test_the_mapping_sets_declared_inputs_of_its_role_only(role):
    mapping = load(os.path.join(MAPPINGS, role + ".yml"))
    assert mapping, "playbooks/vars/%s.yml maps nothing" % role
    assert sorted(set(mapping) - set(specs(role))) == []


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


def test_every_play_that_runs_a_role_loads_its_mapping():
    missing = []
    for path, play in plays():
        direct = {(r["role"] if isinstance(r, dict) else r).split(".")[-1] for r in play.get("roles") or []}
        direct |= included_roles(play)
        loaded = {os.path.normpath(os.path.join(os.path.dirname(path), f)) for f in play.get("vars_files") or []}
        for role in sorted(role_closure(direct)):
            mapping = os.path.join(MAPPINGS, role + ".yml")
            if os.path.exists(mapping) and mapping not in loaded:
                missing.append("%s (%s): vars_files lacks %s" % (os.path.relpath(path, ROOT), play.get("name"),
                                                                 os.path.relpath(mapping, os.path.dirname(path))))
    assert missing == []


def test_a_play_that_runs_a_role_is_found_with_its_indirect_roles():
    """The check above sees the roles a role includes (cluster.yml's running-jobs play probes three)."""
    assert {"containers", "ray_head", "ray_worker", "submit_job", "debug_bundle"} <= role_closure({"running_jobs"})


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
    """{"host|role": {input: value}} - each converted role's defaults under its mapping, templated with
    each host's variables of ``inventory`` (a folder), as a play loading the mapping sees them."""
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
        for role in CONVERTED:
            variables = dict(host_variables)
            defaults = trusted(load(os.path.join(ROOT, "roles", role, "defaults", "main.yml")), trust_as_template)
            variables.update(defaults)
            variables.update(trusted(load(os.path.join(MAPPINGS, role + ".yml")), trust_as_template))
            variables.update(extra)
            variables.update(role_path=os.path.join(ROOT, "roles", role), playbook_dir=os.path.join(ROOT, "playbooks"))
            render = Templar(loader, variables=variables)
            result["%s|%s" % (host.name, role)] = {name: render.template(variables[name]) for name in defaults}
    return result


def render_inputs(inventory, extra=None):
    """{(host, role): {input: value}} from _render in a fresh Python."""
    proc = subprocess.run([sys.executable, __file__, inventory, json.dumps(extra or {})], cwd=ROOT,
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {tuple(key.split("|")): values for key, values in json.loads(proc.stdout).items()}


@pytest.fixture(scope="module")
def common_inventory(tmp_path_factory):
    """The local inventory's hosts with the common settings only (inventories/common/all)."""
    folder = tmp_path_factory.mktemp("common-inventory")
    shutil.copy(os.path.join(ROOT, "inventories", "local", "hosts.yml"), folder / "hosts.yml")
    os.makedirs(folder / "group_vars" / "all")
    os.symlink(os.path.join(ROOT, "inventories", "common", "all"), folder / "group_vars" / "all" / "00-mvp")
    return str(folder)


# Literal defaults that differ from what the common settings give, and why (docs in each defaults file).
DIFFERENT_ON_PURPOSE = {
    # Common: "/node" (beside an empty mvp_host_shared_dir); the literal is the local inventory's.
    "containers_host_node_dir",
    # Common: true wherever the inventory has docker hosts; alone, a role starts Ray over the connection.
    "ray_head_in_container", "ray_worker_in_container", "ray_auth_token_in_container",
    # Common: <checkout>/reports and the whole workload catalog; alone: a folder under /var/tmp, no catalog.
    "run_report_local_dir", "run_report_catalog",
    # Common: the inventory folder's file, through mvp_ray_auth_token_file (the default is the same path).
    "ray_auth_token_controller_file",
    # Same values, keyed by the names the messages give: the mapping names the inventory settings.
    "preflight_head_ports", "preflight_disk_paths",
    # Common: the inventory's watchdog and queue settings (dicts of the job tools' tuning); alone: the builder's
    # own fallbacks ({}), with the same code_id, model, ports and checkpoint counts.
    "submit_job_builder_defaults",
    # Common: the workload catalog (like run_report_catalog).
    "submit_job_workloads",
    # Common: the MLflow server's basic-auth credentials (mvp_mlflow_credentials_env); alone: no secret besides
    # the internal token. And the inventory folder's password file, through mvp_mlflow_password_file.
    "ray_worker_more_secrets", "mlflow_server_password_file",
    # Common: the controller's venv made with the Python that runs Ansible (python3 on another host); the Ray
    # auth token generated into the inventory folder; alone: python3, no token.
    "job_controller_python", "job_controller_ray_auth_token",
    # Common: the docker host's mvp_host_shared_dir ('' in the common settings); alone: the local inventory's.
    "job_controller_shared_dir",
}


def same(left, right):
    return left == right or str(left) == str(right)


def test_the_literal_defaults_are_what_the_common_settings_give(common_inventory):
    rendered = render_inputs(common_inventory)
    differ = {}
    for (host, role), values in rendered.items():
        defaults = load(os.path.join(ROOT, "roles", role, "defaults", "main.yml"))
        for name, value in values.items():
            if name not in DIFFERENT_ON_PURPOSE and isinstance(defaults[name], (str, int, float, bool, list, dict)) \
                    and "{{" not in str(defaults[name]) and not same(value, defaults[name]):
                differ["%s %s" % (host, name)] = (defaults[name], value)
    assert differ == {}
    # The keyed ones hold the same values under the settings' names.
    head = rendered[("mvp-ray-head", "preflight")]
    assert sorted(map(int, head["preflight_head_ports"].values())) == sorted(
        load(os.path.join(ROOT, "roles", "preflight", "defaults", "main.yml"))["preflight_head_ports"].values())
    assert sorted(head["preflight_disk_paths"].values()) == sorted(
        load(os.path.join(ROOT, "roles", "preflight", "defaults", "main.yml"))["preflight_disk_paths"].values())


@pytest.mark.parametrize("inventory", ["local", "dev", "prod"])
def test_every_mapping_renders_for_every_host_of_a_shipped_inventory_and_passes_the_role_spec(inventory):
    from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
    extra = {"workload": "sft", "last": "3", "fail_on_regression": "true", "diff_max_lines": "50"}
    rendered = render_inputs(os.path.join(ROOT, "inventories", inventory), extra)
    for (host, role), values in rendered.items():
        options = {name: {k: v for k, v in declared[0].items() if k in ("type", "elements", "no_log", "choices")}
                   for name, declared in specs(role).items()}
        result = ArgumentSpecValidator(options).validate(values)
        assert result.error_messages == [], (host, role)
    # The command line's names reach the role (report.yml -e workload=sft -e last=3).
    sample = next(v for (h, r), v in rendered.items() if r == "run_report")
    assert (sample["run_report_workload"], str(sample["run_report_last"])) == ("sft", "3")


if __name__ == "__main__":
    json.dump(_render(sys.argv[1], json.loads(sys.argv[2])), sys.stdout)
