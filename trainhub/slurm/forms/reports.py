"""The flags of squeue, sprio, sshare and sacct as GET forms (their names are the API's parameters)."""

from django import forms


def _text(label: str, help_text: str = "") -> forms.CharField:
    return forms.CharField(required=False, label=label, help_text=help_text)


def _flag(label: str) -> forms.BooleanField:
    return forms.BooleanField(required=False, label=label)


class SqueueForm(forms.Form):
    user = _text("-u user(s)")
    partition = _text("-p partition(s)")
    states = _text("-t states", "e.g. PD,R")
    long = _flag("-l long")
    start = _flag("--start")
    format = _text("-o format", "e.g. %.7i %.8u %B %U")
    outputFormat = _text("-O fields", "e.g. JobID:7,UserName,AllocNodes,PendingTime")  # noqa: N815 (the API's name)


class SinfoForm(forms.Form):
    partition = _text("-p partition(s)")
    nodes = _flag("-N node-oriented")
    long = _flag("-l long")
    summarize = _flag("-s summarize")
    reasons = _flag("-R reasons")
    node = _text("scontrol show node", "node names (gpu1,gpu[3-4]): their details instead of sinfo")


class SprioForm(forms.Form):
    user = _text("-u user(s)")
    jobs = _text("-j job id(s)")
    partition = _text("-p partition(s)")
    long = _flag("-l long")
    norm = _flag("-n normalized")
    weights = _flag("-w weights")


class SshareForm(forms.Form):
    accounts = _text("-A account(s)")
    users = _text("-u user(s)")
    all = _flag("-a all users")
    long = _flag("-l long")


class SacctForm(forms.Form):
    jobs = _text("-j job id(s)")
    user = _text("-u user(s)")
    state = _text("-s states")
    starttime = _text("-S start", "YYYY-MM-DD[THH:MM]; default: today")
    allusers = _flag("-a all users")
    duplicates = _flag("-D duplicates")
    brief = _flag("-b brief")
    allocations = _flag("-X allocations (no steps)")
