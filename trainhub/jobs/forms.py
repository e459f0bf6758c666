"""Browser forms. They only turn text into the CustomJob wire shape; every rule about what a
valid job is stays in jobs.spec, whose field violations are shown back on the matching fields."""

from __future__ import annotations

import re
import shlex
from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator

from trainhub.catalog.machines import MACHINE_TYPES, NO_ACCELERATOR, accelerator_label, accelerator_types
from trainhub.common.errors import ApiError, FieldViolation
from trainhub.common.formerrors import show_service_error
from trainhub.common.locations import LOCATION_HINT, LOCATION_MAX_LENGTH, LOCATION_PATTERN
from trainhub.common.widgets import FastSelect
from trainhub.iam.models import Project
from trainhub.jobs.capacity import NodeKind, never_fitting, node_kinds
from trainhub.jobs.page_selectors import TABS, JobQuery, tab_for
from trainhub.jobs.spec import MAX_DISPLAY_NAME, MAX_WORKER_POOLS, SpecError, parse_custom_job

DEFAULT_LOCATION = "us-central1"
STRATEGY_CHOICES = [
    ("STANDARD", "Standard: start as soon as the GPUs are free"),
    ("FLEX_START", "Flex-start: wait until every GPU of the job is free at once"),
    ("SPOT", "Spot: preemptible capacity"),
]


def machine_catalog() -> dict[str, dict[str, list[int]]]:
    """machine type -> attachable accelerator -> allowed counts; embedded in the submit page for its JS."""
    return {name: {kind: list(counts) for kind, counts in machine.accelerators.items()}
            for name, machine in MACHINE_TYPES.items()}


def machine_label(name: str) -> str:
    """A machine type with its vCPUs, memory and built-in GPUs: "a2-highgpu-1g (12 vCPU, 85 GiB, 1 × A100)"."""
    machine = MACHINE_TYPES[name]
    gpus = f", {machine.fixed_gpu[1]} × {accelerator_label(machine.fixed_gpu[0])}" if machine.fixed_gpu else ""
    return f"{name} ({machine.vcpus} vCPU, {machine.memory_gib:g} GiB{gpus})"


def machine_choices(exclude: frozenset[str] = frozenset()) -> list[tuple[str, list[tuple[str, str]]]]:
    """Machine types grouped by family for a <select>, each labelled with its vCPUs, memory and GPUs."""
    families: dict[str, list[tuple[str, str]]] = {}
    for name in MACHINE_TYPES:
        if name not in exclude:
            families.setdefault(name.split("-")[0].upper(), []).append((name, machine_label(name)))
    return list(families.items())


def inventory_machine_choices(kinds: list[NodeKind], *, location: str, catalog: bool,
                              chosen: str = "") -> list[tuple[str, list[tuple[str, str]]]]:
    """The machine types the location's nodes have, each with its free / total nodes as a hint;
    the rest of the catalog only when asked for (``catalog``). A type chosen outside them stays
    listed, so the form shows what was sent next to the error that explains it."""
    hints: dict[str, list[str]] = {}
    for kind in kinds:
        if kind.machine_type in MACHINE_TYPES:
            fixed = MACHINE_TYPES[kind.machine_type].fixed_gpu  # then the machine's label names its GPUs
            hints.setdefault(kind.machine_type, []).append(kind.hint(gpus_named=bool(fixed)))
    groups = [(f"Nodes in {location}", [(name, f"{machine_label(name)} — {'; '.join(hint)}")
                                        for name, hint in sorted(hints.items())])] if hints else []
    if catalog or not hints:
        return groups + machine_choices(exclude=frozenset(hints))
    if chosen in MACHINE_TYPES and chosen not in hints:
        groups.append((f"No nodes in {location}", [(chosen, machine_label(chosen))]))
    return groups


def accelerator_choices() -> list[tuple[str, str]]:
    """Every accelerator type, after "none" (the machine's own GPUs, if any)."""
    return [("", "None / built in")] + [(kind, kind) for kind in accelerator_types()]


def count_choices() -> list[tuple[str, str]]:
    """Every accelerator count some machine type allows."""
    counts = sorted({c for machine in MACHINE_TYPES.values() for cs in machine.accelerators.values() for c in cs})
    return [("", "Default")] + [(str(count), str(count)) for count in counts]


def split_command_line(text: str) -> list[str]:
    """A command line split into an argument list the way a POSIX shell splits it (shlex):
    `python3 -c "print('hi')"` -> ["python3", "-c", "print('hi')"]. Quotes keep spaces and
    newlines in one argument; an unquoted newline separates arguments like a space."""
    try:
        return shlex.split(text, posix=True)
    except ValueError as error:  # "No closing quotation", "No escaped character"
        raise ValidationError(f"{error}: close every quote, or escape a lone quote as \\' or \\\".") from error


def _duration(text: str) -> str | None:
    """"3600" and "3600s" both mean an hour; anything else goes to the spec parser as written."""
    text = text.strip()
    if not text:
        return None
    return f"{text}s" if text.isdigit() else text


class JobListForm(forms.Form):
    """The job list's GET parameters: tab, search, filters, sort and the keyset position.

    Every filter is an equality on one CustomJob column (``COLUMN_FILTERS``); a new one, such as a
    Slurm partition once jobs carry one, is a form field here and one entry there.
    """

    COLUMN_FILTERS = {"state": "state", "strategy": "strategy", "accelerator_type": "accelerator_type"}

    tab = forms.ChoiceField(required=False, choices=[(key, tab.label) for key, tab in TABS.items()],
                            widget=forms.HiddenInput)
    q = forms.CharField(required=False, max_length=128, label="Search", strip=True,
                        widget=forms.TextInput(attrs={"type": "search", "placeholder": "Name starts with, or job id"}))
    project = forms.ChoiceField(required=False, widget=FastSelect)
    user = forms.ChoiceField(required=False, widget=FastSelect)
    state = forms.ChoiceField(required=False, widget=FastSelect)
    strategy = forms.ChoiceField(required=False, widget=FastSelect, choices=[("", "Any strategy")] + [
        (value, value) for value, _ in STRATEGY_CHOICES])
    accelerator_type = forms.ChoiceField(required=False, label="GPU type", widget=FastSelect, choices=[
        ("", "Any GPU type")] + [
        (kind, accelerator_label(kind)) for kind in [*accelerator_types(), NO_ACCELERATOR]])
    sort = forms.ChoiceField(required=False, widget=FastSelect)
    cursor = forms.CharField(required=False, widget=forms.HiddenInput)

    def __init__(self, data: Any, *, projects: list[Project], submitters: dict[str, int], me: str) -> None:
        super().__init__(data)
        self.list_tab = tab_for(key=self.data.get("tab", ""), state=self.data.get("state", ""))
        self.projects = projects
        self.submitters = submitters
        self.fields["project"].choices = [("", "All my projects")] + [(p.project_id, p.project_id) for p in projects]
        others = [(name, name) for name in submitters if name != me]
        self.fields["user"].choices = [("", "Anyone"), (me, f"Me ({me})")] + others
        self.fields["state"].choices = [("", "Any state")] + [
            (state, state.removeprefix("JOB_STATE_").capitalize()) for state in self.list_tab.states]
        self.fields["sort"].choices = [(sort.key, sort.label) for sort in self.list_tab.sorts]

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        token = data.get("cursor")
        data["cursor"] = None
        if token:
            try:
                data["cursor"] = self.list_tab.sort(data.get("sort", "")).ordering.decode(token)
            except ApiError:
                self.add_error("cursor", "This is not a link from a previous page; start again from the first page.")
        return data

    def query(self) -> JobQuery:
        data = self.cleaned_data
        columns = {column: data[name] for name, column in self.COLUMN_FILTERS.items() if data[name]}
        if data["user"]:
            columns["created_by_id"] = self.submitters.get(data["user"], 0)  # 0: "me" with no membership
        chosen = data["project"]
        return JobQuery(tab=self.list_tab, projects=[p for p in self.projects if not chosen or p.project_id == chosen],
                        sort=self.list_tab.sort(data["sort"]), columns=columns, search=data["q"],
                        cursor=data["cursor"])

    @property
    def is_filtered(self) -> bool:
        return any(self.data.get(name) for name in ("q", "project", "user", "state", "strategy", "accelerator_type"))


class LogFilterForm(forms.Form):
    """Which task's log lines to show, and (for the live tail) after which line id."""

    task = forms.ChoiceField(required=False, label="Task", widget=FastSelect)
    after = forms.IntegerField(required=False, min_value=0, max_value=2**63 - 1, widget=forms.HiddenInput)

    def __init__(self, *args: Any, job_spec: dict, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.tasks = {
            f"workerpool{pool_index}-{replica_index}": (pool_index, replica_index)
            for pool_index, pool in enumerate(job_spec["workerPoolSpecs"]) if pool
            for replica_index in range(pool["replicaCount"])
        }
        self.fields["task"].choices = [("", "All tasks")] + [(name, name) for name in self.tasks]

    def selected_task(self) -> tuple[int, int] | None:
        return self.tasks.get(self.cleaned_data["task"])


class JobSettingsForm(forms.Form):
    display_name = forms.CharField(max_length=MAX_DISPLAY_NAME)
    location = forms.CharField(max_length=LOCATION_MAX_LENGTH, initial=DEFAULT_LOCATION,
                               validators=[RegexValidator(LOCATION_PATTERN, LOCATION_HINT)])
    strategy = forms.ChoiceField(choices=STRATEGY_CHOICES, initial="STANDARD", widget=FastSelect)
    timeout = forms.CharField(required=False, max_length=32,
                              help_text='Longest run time, e.g. "3600s" or 3600. Empty: 7 days.')
    max_wait = forms.CharField(required=False, max_length=32, label="Max wait duration",
                               help_text='Flex-start only: how long to wait for capacity. Empty: 1 day; "0s": forever.')
    restart_job_on_worker_restart = forms.BooleanField(
        required=False, label="Restart the job when a worker restarts",
        help_text="Requeue the whole job if a replica's node is lost, instead of failing it.")
    #: Offer the whole machine catalog, and queue a job this location's nodes cannot run (yet).
    catalog = forms.BooleanField(required=False, widget=forms.HiddenInput)

    def scheduling(self) -> dict[str, Any]:
        data = self.cleaned_data
        scheduling = {"strategy": data["strategy"], "restartJobOnWorkerRestart": data["restart_job_on_worker_restart"]}
        for key, field in (("timeout", "timeout"), ("maxWaitDuration", "max_wait")):
            if duration := _duration(data[field]):
                scheduling[key] = duration
        return scheduling


class WorkerPoolForm(forms.Form):
    """One worker pool. Pool 0 is the primary replica (always one); pools 1-3 are skipped when
    their machine type is left empty."""

    # The data- attributes are the hooks of static/js/trainhub.js.
    machine_type = forms.ChoiceField(required=False, widget=FastSelect(attrs={"data-machine-type": ""}))
    accelerator_type = forms.ChoiceField(required=False, choices=accelerator_choices,
                                         widget=FastSelect(attrs={"data-accelerator-type": ""}))
    accelerator_count = forms.ChoiceField(required=False, choices=count_choices,
                                          widget=FastSelect(attrs={"data-accelerator-count": ""}))
    replica_count = forms.IntegerField(min_value=1, initial=1, required=False, help_text="Empty: 1.")
    image_uri = forms.CharField(required=False, max_length=1024, label="Container image URI")
    command = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2, "data-argv": ""}),
                              help_text="""A command line, split as a shell splits it: python3 -c "print('hi')". """
                                        "Empty: the image's entrypoint.")
    args = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3, "data-argv": ""}),
                           label="Arguments", help_text="Appended to the command, split the same way; quote an "
                                                        "argument that holds spaces or several lines.")
    env = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}), label="Environment",
                          help_text="NAME=value, one per line.")

    def __init__(self, *args: Any, index: int, offered: list | None = None, **kwargs: Any) -> None:
        """``offered``: the machine types the select lists (default: the whole catalog, which
        every form accepts; the job form offers its location's inventory)."""
        super().__init__(*args, prefix=f"pool{index}", **kwargs)
        self.index = index
        machine = self.fields["machine_type"]
        empty = [("", "Choose a machine type" if index == 0 else "Not used (skip this pool)")]
        machine.required = index == 0
        machine.choices = empty + machine_choices()
        if offered is not None:
            machine.widget.choices = empty + offered
        if index == 0:
            del self.fields["replica_count"]  # the primary pool runs exactly one replica

    @property
    def task_name(self) -> str:
        return f"workerpool{self.index}"

    @property
    def section(self) -> str:
        """How the page names this pool (error lists say "Worker pool 1 · Container image URI")."""
        return f"Worker pool {self.index}"

    def clean_command(self) -> list[str]:
        return split_command_line(self.cleaned_data["command"])

    def clean_args(self) -> list[str]:
        return split_command_line(self.cleaned_data["args"])

    def clean_env(self) -> list[dict[str, str]]:
        env = []
        for number, line in enumerate(self.cleaned_data["env"].splitlines(), start=1):
            if not line.strip():
                continue
            name, equals, value = line.partition("=")
            if not equals or not name.strip():
                raise ValidationError(f"Line {number}: write NAME=value.")
            env.append({"name": name.strip(), "value": value})
        return env

    def worker_pool_spec(self) -> dict[str, Any]:
        """The pool as a workerPoolSpecs entry; {} (an unused pool) when no machine type is chosen."""
        data = self.cleaned_data
        if not data["machine_type"]:
            return {}
        machine_spec: dict[str, Any] = {"machineType": data["machine_type"]}
        if data["accelerator_type"]:
            machine_spec["acceleratorType"] = data["accelerator_type"]
        if data["accelerator_count"]:
            machine_spec["acceleratorCount"] = int(data["accelerator_count"])
        return {
            "machineSpec": machine_spec,
            "replicaCount": data.get("replica_count") or 1,
            "containerSpec": {
                "imageUri": data["image_uri"].strip(),
                "command": data["command"],
                "args": data["args"],
                "env": data["env"],
            },
        }


_POOL_PATH = re.compile(r"^jobSpec\.workerPoolSpecs\[(\d+)\]\.?(.*)$")
_POOL_FIELD_BY_PATH = (
    ("machineSpec.machineType", "machine_type"),
    ("machineSpec.acceleratorType", "accelerator_type"),
    ("machineSpec.acceleratorCount", "accelerator_count"),
    ("replicaCount", "replica_count"),
    ("containerSpec.imageUri", "image_uri"),
    ("containerSpec.command", "command"),
    ("containerSpec.args", "args"),
    ("containerSpec.env", "env"),
)
_SETTINGS_FIELD_BY_PATH = {
    "displayName": "display_name",
    "jobSpec.scheduling.strategy": "strategy",
    "jobSpec.scheduling.timeout": "timeout",
    "jobSpec.scheduling.maxWaitDuration": "max_wait",
    "jobSpec.scheduling.restartJobOnWorkerRestart": "restart_job_on_worker_restart",
}


class ArgvPreviewForm(forms.Form):
    """The command and arguments of one pool as typed (``prefix`` "pool0"), for the argument list
    shown before submit."""

    command = forms.CharField(required=False)
    args = forms.CharField(required=False, label="Arguments")

    def argv(self) -> tuple[list[str], list[str], str]:
        """(command, args, problem): the split lists, or the first field's splitting problem."""
        lists = []
        for name in ("command", "args"):
            try:
                lists.append(split_command_line(self.data.get(self.add_prefix(name), "")))
            except ValidationError as error:
                return [], [], f"{self[name].label}: {error.messages[0]}"
        return lists[0], lists[1], ""


class JobSubmitForm:
    """The submit page: job settings and up to four worker pools, as one CustomJob body."""

    def __init__(self, data: Any = None, *, location: str, kinds: list[NodeKind] | None = None,
                 catalog: bool = False) -> None:
        """``kinds``: the location's nodes; the machine selects then offer their types (the whole
        catalog with ``catalog``, or when the location has no nodes), and a pool they can never
        run is refused at once (``never_fits``). None: the whole catalog, no check."""
        # The hidden field posts "True" or "False": read it as the BooleanField does.
        catalog = catalog or forms.BooleanField(required=False).to_python((data or {}).get("catalog"))
        self.settings = JobSettingsForm(data, initial={"location": location, "catalog": catalog})
        self.kinds, self.catalog, self.location_shown = kinds, catalog, location
        self.pools = [WorkerPoolForm(data, index=index, offered=None if kinds is None else inventory_machine_choices(
            kinds, location=location, catalog=catalog, chosen=(data or {}).get(f"pool{index}-machine_type", "")))
            for index in range(MAX_WORKER_POOLS)]
        #: What the service rejected: listed at the top of the page, and on the matching fields.
        self.violations: list[FieldViolation] = []
        self.service_message = ""

    def _forms(self) -> list[forms.Form]:
        return [self.settings, *self.pools]

    def is_valid(self) -> bool:
        return all([form.is_valid() for form in self._forms()])  # a list: validate every form

    @property
    def has_errors(self) -> bool:
        return any(form.errors for form in self._forms())

    @property
    def location(self) -> str:
        return self.settings.cleaned_data["location"]

    def custom_job_body(self) -> dict[str, Any]:
        return {
            "displayName": self.settings.cleaned_data["display_name"],
            "jobSpec": {
                "workerPoolSpecs": [pool.worker_pool_spec() for pool in self.pools],
                "scheduling": self.settings.scheduling(),
            },
        }

    def show_service_error(self, error: ApiError) -> None:
        show_service_error(self, error, self._field_for)

    def never_fits(self) -> bool:
        """After is_valid: refuse, on the fields, pools this location's nodes can never run
        (unless the whole catalog was asked for: nodes may be added). True when refused."""
        if self.kinds is None or self.catalog:
            return False
        try:
            pools = parse_custom_job(self.custom_job_body()).pools
        except SpecError:
            return False  # the service names what is wrong with the spec itself
        kinds = self.kinds if self.location == self.location_shown else node_kinds(location=self.location)
        violations = never_fitting(pools=pools, kinds=kinds, location=self.location)
        if violations:
            show_service_error(self, ApiError(400, "the job could never start here", violations=violations),
                               self._field_for)
        return bool(violations)

    def _field_for(self, path: str) -> tuple[forms.Form, str | None]:
        match = _POOL_PATH.match(path)
        if match and int(match.group(1)) < len(self.pools):
            rest = match.group(2)
            field = next((name for prefix, name in _POOL_FIELD_BY_PATH if rest.startswith(prefix)), None)
            return self.pools[int(match.group(1))], field
        return self.settings, _SETTINGS_FIELD_BY_PATH.get(path)
