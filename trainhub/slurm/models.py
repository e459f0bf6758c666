"""Slurm clusters as the database records them: what slurmctld keeps in memory and slurmdbd on disk.

- A cluster owns node pools (its nodes are dedicated to it), partitions over those pools, its
  slurm.conf keys and prolog/epilog scripts; every admin change leaves a ClusterAuditEntry.
- Accounting (slurmdbd): accounts in a tree under ``root``, users, associations (account, user,
  partition) with shares, limits and decayed usage, and QOS.
- Jobs: SlurmJob (the job as squeue sees it), one JobRun per run (the accounting record sacct
  shows; a requeued job has several), JobNode per allocated node of the current run (the agent's
  prolog / batch / epilog phases there), JobStep per ``srun`` of a run (sacct's JOBID.N) with a
  StepNode per node it runs tasks on and StepLogLine for its tasks' output, and GpuAllocation rows
  whose partial unique index makes allocating one GPU twice impossible.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from trainhub.iam.models import Project
from trainhub.inventory.models import Node, NodePool

class JobState(models.TextChoices):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    TIMEOUT = "TIMEOUT"
    PREEMPTED = "PREEMPTED"
    REQUEUED = "REQUEUED"
    NODE_FAIL = "NODE_FAIL"


ACTIVE_STATES = frozenset({JobState.PENDING, JobState.RUNNING})
#: A running job's ``ending_state`` while it runs out a preemption's GraceTime (CANCEL, REQUEUE): it
#: may still be cancelled, as slurmctld kills it for scancel then.
PREEMPTION_ENDINGS = frozenset({JobState.PREEMPTED, JobState.REQUEUED})


class Hold(models.TextChoices):
    NONE = "", "not held"
    USER = "user", "held by its user (JobHeldUser)"
    ADMIN = "admin", "held by an administrator (JobHeldAdmin)"


class NodePhase(models.TextChoices):
    """What the agent does with a job on one node: prolog, then the batch script (on the batch
    host), then the epilog; DONE when the node is free of the job."""

    PROLOG = "PROLOG"
    READY = "READY"
    RUNNING = "RUNNING"
    EPILOG = "EPILOG"
    DONE = "DONE"


class SlurmCluster(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="slurm_clusters")
    location = models.CharField(max_length=32)
    cluster_id = models.SlugField(max_length=63)
    display_name = models.CharField(max_length=128, blank=True)
    login_pool = models.ForeignKey(NodePool, null=True, blank=True, on_delete=models.PROTECT,
                                   related_name="slurm_login_clusters")
    home_directory_storage = models.CharField(max_length=255, blank=True)
    #: slurm.conf keys set by the spec or by admins (key -> value text), as Slurm's config maps.
    config = models.JSONField(default=dict)
    #: Node features (NodeName=... Features=, scontrol update AvailableFeatures= ActiveFeatures=):
    #: node name -> {"available": [...], "active": [...]}; a node not here has none.
    node_features = models.JSONField(default=dict, blank=True)
    #: Node RealMemory in MB (slurm.conf's NodeName=... RealMemory=): node name -> MB; a node not
    #: here has its machine type's memory.
    node_real_memory = models.JSONField(default=dict, blank=True)
    #: Node Weight (slurm.conf's NodeName=... Weight=): node name -> weight; a node not here has
    #: Slurm's default, 1. Jobs get the usable nodes of the lowest weight first.
    node_weight = models.JSONField(default=dict, blank=True)
    prolog_scripts = models.JSONField(default=list)
    epilog_scripts = models.JSONField(default=list)
    default_partition = models.CharField(max_length=63)
    next_job_id = models.PositiveBigIntegerField(default=1)
    #: priority/basic's FIFO values given so far: slurmctld's lowest_prio is TOP_PRIORITY less it. A
    #: job takes one as it is submitted (one held at submission takes none) and as it is released.
    fifo_priorities = models.PositiveBigIntegerField(default=0)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    create_time = models.DateTimeField()
    update_time = models.DateTimeField()
    #: priority_last_decay_ran: usage is decayed and accrued from here to the next pass.
    last_decay_time = models.DateTimeField(null=True, blank=True)
    #: When every pending job's priority was last recomputed (every PriorityCalcPeriod).
    last_priority_time = models.DateTimeField(null=True, blank=True)
    #: When the backfill scheduler last ran (every bf_interval; --start estimates come from it).
    last_backfill_time = models.DateTimeField(null=True, blank=True)
    #: When the main scheduler last ran on its timer (slurmctld's last_sched_time: a submission waits
    #: for it batch_sched_delay seconds; scontrol's LastSchedEval of the pending jobs it looked at).
    last_main_time = models.DateTimeField(null=True, blank=True)
    last_usage_reset = models.DateTimeField(null=True, blank=True)
    #: The last scheduler pass: when it ran and what it did or which error stopped it.
    last_pass_time = models.DateTimeField(null=True, blank=True)
    last_pass_summary = models.JSONField(default=dict, blank=True)
    #: What the last decay run normalised priorities against, cluster-wide: {"nodes", "cpus",
    #: "max_partition_factor", "max_assoc_priority"} (empty before the first). A job submitted until
    #: the next run gets its priority from these and its association's fs_factor, as slurmctld gives
    #: one as it makes its record (_set_job_prio) from its last decay run's values (snapshot.priority_norms).
    priority_norms = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["project_id", "location", "cluster_id"]
        constraints = [models.UniqueConstraint(fields=["project", "location", "cluster_id"],
                                               name="slurm_cluster_identity")]

    def __str__(self) -> str:
        return self.cluster_id

    @property
    def owner_key(self) -> str:
        """What the cluster's nodes carry in Node.dedicated_to."""
        return f"slurmClusters/{self.pk}"

    @property
    def resource_name(self) -> str:
        return f"projects/{self.project.project_id}/locations/{self.location}/slurmClusters/{self.cluster_id}"


class Partition(models.Model):
    """A PartitionName= line: a named set of the cluster's node pools and its scheduling knobs."""

    cluster = models.ForeignKey(SlurmCluster, on_delete=models.CASCADE, related_name="partitions")
    name = models.CharField(max_length=63)
    position = models.PositiveSmallIntegerField(default=0)
    node_pools = models.ManyToManyField(NodePool, related_name="slurm_partitions")
    #: The options of its PartitionName= line (PriorityTier, MaxTime, PreemptMode, ...), as set.
    config = models.JSONField(default=dict)

    class Meta:
        ordering = ["cluster_id", "position", "name"]
        constraints = [models.UniqueConstraint(fields=["cluster", "name"], name="slurm_partition_name")]

    def __str__(self) -> str:
        return self.name


class ClusterAuditEntry(models.Model):
    """Who changed what on a cluster, from which value to which (None = unset)."""

    cluster = models.ForeignKey(SlurmCluster, on_delete=models.CASCADE, related_name="audit")
    time = models.DateTimeField()
    actor = models.CharField(max_length=150)
    subject = models.CharField(max_length=128)
    old_value = models.JSONField(null=True, blank=True)
    new_value = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["-time", "-id"]


class Qos(models.Model):
    cluster = models.ForeignKey(SlurmCluster, on_delete=models.CASCADE, related_name="qos_set")
    name = models.CharField(max_length=64)
    description = models.CharField(max_length=255, blank=True)
    #: Every QOS setting sacctmgr knows (Priority, Flags, Preempt, MaxWall, GrpTRES, ...), by its
    #: Slurm name; absent = not set.
    settings = models.JSONField(default=dict)
    raw_usage = models.FloatField(default=0.0)
    #: Its jobs' usage per TRES in TRES-seconds, decayed like raw_usage (Slurm's QOS usage_tres_raw,
    #: what the QOS's GrpTRESMins limits).
    tres_usage = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["cluster_id", "name"]
        constraints = [models.UniqueConstraint(fields=["cluster", "name"], name="slurm_qos_name")]

    def __str__(self) -> str:
        return self.name


class Account(models.Model):
    cluster = models.ForeignKey(SlurmCluster, on_delete=models.CASCADE, related_name="accounts")
    name = models.CharField(max_length=64)
    description = models.CharField(max_length=255, blank=True)
    organization = models.CharField(max_length=255, blank=True)

    class Meta:
        ordering = ["cluster_id", "name"]
        constraints = [models.UniqueConstraint(fields=["cluster", "name"], name="slurm_account_name")]

    def __str__(self) -> str:
        return self.name


class SlurmUser(models.Model):
    cluster = models.ForeignKey(SlurmCluster, on_delete=models.CASCADE, related_name="slurm_users")
    name = models.CharField(max_length=150)
    default_account = models.CharField(max_length=64, blank=True)
    admin_level = models.CharField(max_length=16, default="None")

    class Meta:
        ordering = ["cluster_id", "name"]
        constraints = [models.UniqueConstraint(fields=["cluster", "name"], name="slurm_user_name")]

    def __str__(self) -> str:
        return self.name


class Association(models.Model):
    """(account, user, partition) with its shares, limits and decayed usage.

    user == "" is the account's own association (a node of the tree; its parent is the parent
    account's association); root's has no parent. partition == "" applies to every partition.
    """

    cluster = models.ForeignKey(SlurmCluster, on_delete=models.CASCADE, related_name="associations")
    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="associations")
    user = models.CharField(max_length=150, blank=True)
    partition = models.CharField(max_length=63, blank=True)
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.CASCADE, related_name="children")
    #: Fairshare=N; ``None`` is Fairshare=parent.
    shares = models.PositiveIntegerField(null=True, default=1)
    #: Priority, GrpTRES, MaxJobs, MaxWall, QOS, DefaultQOS, ... by Slurm name; absent = not set.
    settings = models.JSONField(default=dict)
    #: Usage in billable TRES-seconds, decayed by PriorityDecayHalfLife: sshare's RawUsage. A run's
    #: last period is added when it ends (slurmctld's priority_p_job_end), not at the next decay.
    raw_usage = models.FloatField(default=0.0)
    #: raw_usage as the last decay calculation left it: what NormUsage, EffectvUsage, LevelFS,
    #: FairShare and so every priority are computed from until the next PriorityCalcPeriod (slurmctld
    #: sets usage_norm, usage_efctv and fs_factor only in its decay thread).
    decay_usage = models.FloatField(default=0.0)
    #: FairShare as the last decay run computed it (slurmctld's usage->fs_factor, which only its decay
    #: thread sets): what a job submitted before the next run is given.
    fs_factor = models.FloatField(default=0.0)
    #: LevelFS as the last decay run computed it (slurmctld's usage->level_fs, set only by its decay
    #: thread; 0 where sshare prints none); None: no run has seen this association yet.
    level_fs = models.FloatField(null=True, blank=True)
    #: This association's own jobs' usage per TRES (cpu, node, gres/gpu, billing) in TRES-seconds,
    #: decayed like raw_usage: Slurm's usage_tres_raw, what GrpTRESMins limits (summed over the subtree).
    tres_usage = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["cluster_id", "account__name", "user", "partition"]
        constraints = [models.UniqueConstraint(fields=["cluster", "account", "user", "partition"],
                                               name="slurm_association_identity")]

    def __str__(self) -> str:
        who = f"{self.user}@" if self.user else ""
        where = f"/{self.partition}" if self.partition else ""
        return f"{who}{self.account.name}{where}"


class SlurmJob(models.Model):
    # No index of its own: the unique (cluster, job_id) and the queue's indexes lead with it, and every
    # sbatch would write a fourth.
    cluster = models.ForeignKey(SlurmCluster, on_delete=models.CASCADE, related_name="jobs", db_index=False)
    job_id = models.PositiveBigIntegerField()
    name = models.CharField(max_length=255)
    submitted_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL,
                                     related_name="slurm_jobs")
    user_name = models.CharField(max_length=150)
    #: The submitter's uid, gid and group name at submission (iam.selectors.posix_account), kept as
    #: slurmctld keeps job_ptr->user_id and group_id: squeue's %U %G %g, scontrol's UserId and GroupId.
    uid = models.PositiveIntegerField(default=0)
    gid = models.PositiveIntegerField(default=0)
    group_name = models.CharField(max_length=150, blank=True, default="")
    account = models.CharField(max_length=64)
    partition = models.CharField(max_length=63)
    qos = models.CharField(max_length=64)
    num_nodes = models.PositiveIntegerField(default=1)
    num_tasks = models.PositiveIntegerField(default=1)
    cpus_per_task = models.PositiveIntegerField(default=1)
    gpus_per_node = models.PositiveIntegerField(default=0)
    #: -n without -N: num_nodes is slurmctld's estimate (the fewest nodes the tasks fit on) and the
    #: tasks fill the nodes they get in order (scheduler.TaskSpread); --gpus-per-task's count.
    nodes_from_tasks = models.BooleanField(default=False)
    #: -n or --ntasks-per-node was given (slurmctld keeps details->num_tasks from submission; sbatch makes
    #: --ntasks-per-node's -N x it): NumTasks shows num_tasks even where the job never had a node test
    #: (fixtures/22.05/job-records: ``-N 2 -n 3 -H`` cancelled, 3), where one without shows N/A.
    tasks_given = models.BooleanField(default=False)
    #: --ntasks-per-node (0: not given): with -n the most tasks of a node, and each node needs that many
    #: tasks' CPUs free (slurmctld's pn_min_cpus, scontrol's NtasksPerN:B:S:C and MinCPUsNode).
    ntasks_per_node = models.PositiveIntegerField(default=0)
    #: sbatch -N's upper bound (its count when -N gives no range); 0 without -N. scontrol shows a
    #: pending job's NumNodes as MIN-MAX when -N was given.
    max_nodes = models.PositiveIntegerField(default=0)
    #: -N MIN-MAX's MIN (0 for no range): what the job asked for, kept for its request (sacct's ReqTRES,
    #: a pending job's TRES and NumTasks) while num_nodes is the count the scheduler tried it with
    #: (slurmctld's node_cnt_wag: a waiting -N 3-4 shows NumNodes=4-4) and then the nodes it got, as few
    #: as MIN (fixtures/22.05/node-range).
    min_nodes = models.PositiveIntegerField(default=0)
    #: A node range without -n: num_tasks counts a task a node (MIN, then the nodes it got), but the job
    #: asks for one task's CPUs (node-range/sacct.txt: ``-N 2-4`` ReqTRES cpu=1; pending NumCPUs=1).
    tasks_from_nodes = models.BooleanField(default=False)
    gpus_per_task = models.PositiveIntegerField(default=0)
    #: --cpus-per-gpu: CPUs allocated with each GPU on a node, when more than its tasks' (0: not asked).
    cpus_per_gpu = models.PositiveIntegerField(default=0)
    #: --gpus-per-node's count (0: not given; --gres=gpu:N asks as many but sets no variable), which the
    #: batch script sees as SLURM_GPUS_PER_NODE (fixtures/22.05/gpu-env).
    gpus_per_node_option = models.PositiveIntegerField(default=0)
    #: --gpus's count for the whole job (gpus_per_node is its share of each node); 0 without --gpus.
    gpus_per_job = models.PositiveIntegerField(default=0)
    #: The GPU type asked (--gres=gpu:tesla:2, --gpus=x ...; "" = any): the job runs only on nodes
    #: whose GPUs are of this type. A part of gpu_request, so no longer.
    gpu_type = models.CharField(max_length=255, blank=True, default="")
    #: The GPU request as written (gres:gpu:tesla:2, gres:gpu:x, gres:gpu:02), which slurmctld keeps
    #: and shows as TresPerJob, TresPerNode or TresPerTask (scontrol_job.gpu_requests); "" for a
    #: job made without sbatch's options, shown as its count.
    gpu_request = models.CharField(max_length=255, blank=True, default="")
    #: Minutes; null = UNLIMITED.
    time_limit = models.PositiveIntegerField(null=True, blank=True)
    script = models.TextField()
    #: Arguments after the script on sbatch's command line, passed to the script.
    script_args = models.JSONField(default=list, blank=True)
    #: The script's file as sbatch resolved it (sbatch_argv.script_path; "": --wrap, stdin, salloc):
    #: with script_args the job's Command (scontrol_job.command_text).
    script_path = models.CharField(max_length=4096, blank=True, default="")
    work_dir = models.CharField(max_length=1024)
    stdout_pattern = models.CharField(max_length=1024, default="slurm-%j.out")
    stderr_pattern = models.CharField(max_length=1024, blank=True)
    requeue = models.BooleanField(default=True)
    comment = models.CharField(max_length=255, blank=True)

    state = models.CharField(max_length=16, choices=JobState.choices, default=JobState.PENDING)
    #: squeue's REASON for a pending job (Priority, Resources, AssocGrpGRES, ...).
    reason = models.CharField(max_length=128, default="None")
    #: slurmctld's state_reason_prev_db: the last reason other than None, Priority and Resources a queue
    #: build found the job pending with (scheduler.reason_prev_db); its start record carries it to sacct.
    reason_prev_db = models.CharField(max_length=128, default="None")
    #: reason_prev_db as slurmdbd got it with the pending job's first record (services.accounting.
    #: job_records_sent, slurmctld's db_inx thread); blank before. sacct's Reason of a job that never ran.
    reason_recorded = models.CharField(max_length=128, blank=True, default="")
    #: scontrol's state_desc ("launch failed requeued held", "cancelled by alice").
    state_desc = models.CharField(max_length=255, blank=True)
    priority = models.PositiveBigIntegerField(default=0)
    #: priority/basic's FIFO value the job took (SlurmCluster.fifo_priorities), before its nice: its
    #: priority under priority/basic is this less its nice. 0: none yet (held since its submission).
    fifo_priority = models.PositiveBigIntegerField(default=0)
    #: When ``priority`` and the factors below were last computed (a job's submission, then the decay
    #: runs); null: at the next pass (held requeued, released or reniced jobs, jobs submitted before
    #: the first decay run, and every job after a config change).
    priority_time = models.DateTimeField(null=True, blank=True)
    #: When a scheduler pass last evaluated the pending job: the first after its submission (or its
    #: release, renice, held requeue), then every decay run (scontrol's LastSchedEval). None: no pass
    #: yet, so salloc's request is tried first, as slurmctld's job_allocate tries it as it receives it.
    sched_eval_time = models.DateTimeField(null=True, blank=True)
    #: The six multifactor factors (0..1) of that computation, in priority.FACTOR_NAMES order; their
    #: weights are the cluster's PriorityWeight* (kept as typed columns: sprio reads 10,000s of them).
    factor_age = models.FloatField(default=0.0)
    factor_assoc = models.FloatField(default=0.0)
    factor_fairshare = models.FloatField(default=0.0)
    factor_jobsize = models.FloatField(default=0.0)
    factor_partition = models.FloatField(default=0.0)
    factor_qos = models.FloatField(default=0.0)
    #: PriorityWeightTRES terms {tres: [factor, weight]}; empty without PriorityWeightTRES.
    factor_tres = models.JSONField(default=dict, blank=True)
    nice = models.IntegerField(default=0)
    site_factor = models.IntegerField(default=0)
    hold = models.CharField(max_length=8, choices=Hold.choices, blank=True, default=Hold.NONE)
    #: --dependency still to be satisfied, as scontrol prints it ("afterok:2(unfulfilled)"); "" = none.
    dependency = models.CharField(max_length=2048, blank=True, default="")
    restart_count = models.PositiveIntegerField(default=0)
    #: Job arrays (trainhub.slurm.arrays): the array's job id on every record of it (null: no array);
    #: the task this record runs (null while it stands for the pending tasks); those pending tasks
    #: (arrays.compress form, "" once none is left); every task as submitted (for SLURM_ARRAY_TASK_*);
    #: the ``%`` limit (0 = none).
    array_job_id = models.PositiveBigIntegerField(null=True, blank=True)
    array_task_id = models.PositiveIntegerField(null=True, blank=True)
    array_pending = models.TextField(blank=True, default="")
    array_tasks = models.TextField(blank=True, default="")
    array_max_running = models.PositiveIntegerField(default=0)
    #: --mem (per node), --mem-per-cpu, --mem-per-gpu in MB; 0 = not asked (DefMemPer* apply).
    mem_per_node = models.PositiveIntegerField(default=0)
    mem_per_cpu = models.PositiveIntegerField(default=0)
    mem_per_gpu = models.PositiveIntegerField(default=0)
    #: -w / -x as hostlists ("gpu[2-3]"); --exclusive: whole nodes.
    req_nodes = models.CharField(max_length=1024, blank=True, default="")
    exc_nodes = models.CharField(max_length=1024, blank=True, default="")
    exclusive = models.BooleanField(default=False)
    #: -C/--constraint as slurmctld stores it (``a100&ib``); None when not given (scontrol's Features=(null)).
    features = models.CharField(max_length=1024, null=True, blank=True, default=None)
    #: Recorded as given: --export ("" = ALL), --signal ("B:USR1@120"), --mail-type, --mail-user.
    export = models.CharField(max_length=1024, blank=True, default="")
    signal = models.CharField(max_length=64, blank=True, default="")
    mail_type = models.CharField(max_length=128, blank=True, default="")
    mail_user = models.CharField(max_length=255, blank=True, default="")
    submit_time = models.DateTimeField()
    #: Earliest start (--begin; a requeue pushes it ~121 s ahead); eligible from then on.
    begin_time = models.DateTimeField()
    #: Age counts from here; null while not accruing (held, not yet eligible).
    accrue_time = models.DateTimeField(null=True, blank=True)
    start_time = models.DateTimeField(null=True, blank=True)
    #: Started by a backfill iteration, not the main scheduler (scontrol's Scheduler=Backfill).
    started_by_backfill = models.BooleanField(default=False)
    end_time = models.DateTimeField(null=True, blank=True)
    #: squeue --start: when the scheduler expects the job to start (null: unknown).
    expected_start = models.DateTimeField(null=True, blank=True)
    #: squeue --start's SCHEDNODES: the nodes the scheduler plans to start the job on ("" = none).
    expected_nodes = models.CharField(max_length=1024, blank=True, default="")
    node_list = models.CharField(max_length=1024, blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    exit_signal = models.IntegerField(default=0)
    #: Set while a RUNNING job is being stopped: the state it ends in (CANCELLED, TIMEOUT, ...), or
    #: REQUEUED for a preemption victim requeued when its GraceTime ends.
    ending_state = models.CharField(max_length=16, blank=True)
    #: When this run was chosen as a preemption victim (scontrol's PreemptTime; None: not chosen).
    preempt_time = models.DateTimeField(null=True, blank=True)
    #: A victim's GraceTime end (PreemptTime + GraceTime): slurmctld's end time for it from then on
    #: (preempt.c ``end_time = MIN(end_time, preempt_time + grace_time)``); None: not chosen.
    preempt_kill_time = models.DateTimeField(null=True, blank=True)
    #: An allocation without a batch script (salloc, srun outside a job: scontrol's BatchFlag=0); its
    #: command runs where salloc runs, which proves it is alive at ``salloc_seen`` (keep-alive).
    interactive = models.BooleanField(default=False)
    salloc_seen = models.DateTimeField(null=True, blank=True)
    #: scontrol's AllocNode:Sid, squeue's AllocNodes and AllocSID: the host and session sbatch or salloc
    #: ran in, as the CLI reports them ("" and 0: not reported, as from a browser's form).
    alloc_node = models.CharField(max_length=255, blank=True, default="")
    alloc_sid = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["cluster_id", "job_id"]
        constraints = [models.UniqueConstraint(fields=["cluster", "job_id"], name="slurm_job_id_per_cluster")]
        indexes = [models.Index(fields=["cluster", "state", "job_id"], name="slurm_job_queue"),
                   models.Index(fields=["cluster", "state", "priority_time"], name="slurm_job_priority_due"),
                   models.Index(fields=["cluster", "array_job_id"], name="slurm_job_array"),
                   # the pending jobs whose first record is still to be sent (services.accounting.
                   # job_records_sent, every 5 s): usually none, so the tick reads no other job's row
                   models.Index(fields=["submit_time"], name="slurm_job_record_unsent",
                                condition=models.Q(state="PENDING", reason_recorded=""))]

    def __str__(self) -> str:
        return f"{self.cluster.cluster_id}/{self.job_id}"

    @property
    def is_active(self) -> bool:
        return self.state in ACTIVE_STATES

    @property
    def cancellable(self) -> bool:
        """Pending, or running and not already stopped for good (a preemption victim in its GraceTime is not)."""
        return self.is_active and (not self.ending_state or self.ending_state in PREEMPTION_ENDINGS)

    @property
    def reason_in_words(self) -> str:
        """squeue's reason for a page: its "None" (no scheduler pass has evaluated the job yet)
        said in words, since on a page "Reason: None" reads as a missing value."""
        return "None yet (the next scheduler pass has not looked at it)" if self.reason == "None" else self.reason


class JobRun(models.Model):
    """One run of a job: the accounting record sacct prints (sacct -D shows every run)."""

    job = models.ForeignKey(SlurmJob, on_delete=models.CASCADE, related_name="runs")
    index = models.PositiveIntegerField()
    state = models.CharField(max_length=16, choices=JobState.choices, default=JobState.RUNNING)
    submit_time = models.DateTimeField()
    start_time = models.DateTimeField()
    end_time = models.DateTimeField(null=True, blank=True)
    node_list = models.CharField(max_length=1024, blank=True)
    num_nodes = models.PositiveIntegerField()
    alloc_cpus = models.PositiveIntegerField()
    alloc_gpus = models.PositiveIntegerField()
    #: Billable TRES of the allocation (what fair-share charges per second).
    billing = models.FloatField()
    exit_code = models.IntegerField(null=True, blank=True)
    exit_signal = models.IntegerField(default=0)
    #: Largest resident set the agent saw on any node, kilobytes.
    max_rss_kb = models.PositiveBigIntegerField(null=True, blank=True)
    state_desc = models.CharField(max_length=255, blank=True)
    #: The batch script's own record (sacct's JOBID.batch): blank until it launched, RUNNING, then
    #: COMPLETED, FAILED or CANCELLED (stopped by a cancel, time limit, preemption or node failure).
    batch_state = models.CharField(max_length=16, blank=True, default="")
    batch_exit_code = models.IntegerField(null=True, blank=True)
    batch_exit_signal = models.IntegerField(default=0)

    class Meta:
        ordering = ["job_id", "index"]
        constraints = [models.UniqueConstraint(fields=["job", "index"], name="slurm_run_identity")]


class JobNode(models.Model):
    """One allocated node of one run, and where the agent is with the job on it."""

    job = models.ForeignKey(SlurmJob, on_delete=models.CASCADE, related_name="job_nodes")
    run_index = models.PositiveIntegerField()
    node = models.ForeignKey(Node, on_delete=models.PROTECT, related_name="slurm_job_nodes")
    gpu_indices = models.JSONField(default=list)
    cpus = models.PositiveIntegerField(default=1)
    #: The first node of the allocation runs the batch script (BatchHost).
    batch_host = models.BooleanField(default=False)
    phase = models.CharField(max_length=8, choices=NodePhase.choices, default=NodePhase.PROLOG)
    #: The agent must stop the batch script (cancel, time limit, preemption).
    stop_requested = models.BooleanField(default=False)
    #: The end of a preemption's GraceTime: until then the step tasks have SIGTERM and the batch shell
    #: nothing; then the job is killed as at a cancel (SIGTERM, SIGKILL after KillWait). Null: at once.
    kill_at = models.DateTimeField(null=True, blank=True)
    prolog_exit = models.IntegerField(null=True, blank=True)
    epilog_exit = models.IntegerField(null=True, blank=True)
    max_rss_kb = models.PositiveBigIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["job_id", "run_index", "-batch_host", "node__name"]
        constraints = [models.UniqueConstraint(fields=["job", "run_index", "node"], name="slurm_job_node_identity")]
        indexes = [models.Index(fields=["node", "phase"], name="slurm_job_node_phase")]


class GpuAllocation(models.Model):
    """One GPU of one node held by a job. Two live rows for the same GPU cannot both commit."""

    job = models.ForeignKey(SlurmJob, on_delete=models.CASCADE, related_name="gpu_allocations")
    node = models.ForeignKey(Node, on_delete=models.PROTECT, related_name="slurm_gpu_allocations")
    gpu_index = models.PositiveSmallIntegerField()
    active = models.BooleanField(default=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["node", "gpu_index"], condition=models.Q(active=True),
                                               name="slurm_one_job_per_gpu")]
        indexes = [models.Index(fields=["job", "active"], name="slurm_gpu_alloc_job")]


class JobLogLine(models.Model):
    """Output of a job: the batch script's stdout/stderr and the prolog/epilog scripts' output."""

    job = models.ForeignKey(SlurmJob, on_delete=models.CASCADE, related_name="log_lines")
    run_index = models.PositiveIntegerField()
    node_name = models.CharField(max_length=63)
    stream = models.CharField(max_length=8)
    time = models.DateTimeField()
    text = models.TextField()

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["job", "id"], name="slurm_log_job_seq")]


class JobEvent(models.Model):
    """The job's timeline as scontrol/slurmctld logs would tell it."""

    job = models.ForeignKey(SlurmJob, on_delete=models.CASCADE, related_name="events")
    time = models.DateTimeField()
    message = models.TextField()

    class Meta:
        ordering = ["time", "id"]


class JobStep(models.Model):
    """One ``srun`` inside a job's batch script: a job step (sacct's ``JOBID.N``), its tasks spread
    over some of the allocation's nodes. RUNNING until every node reported its tasks' exits; then
    COMPLETED, or FAILED with the worst task's exit (CANCELLED when the job ended under it)."""

    job = models.ForeignKey(SlurmJob, on_delete=models.CASCADE, related_name="steps")
    run_index = models.PositiveIntegerField()
    step_id = models.PositiveIntegerField()
    #: The command's name (sacct's JobName) and its argument list.
    name = models.CharField(max_length=255)
    argv = models.JSONField(default=list)
    #: srun's own environment, which its tasks inherit (srun --export=ALL), the step's variables over it.
    environment = models.JSONField(default=dict)
    num_tasks = models.PositiveIntegerField()
    node_list = models.CharField(max_length=1024)
    #: ``srun -l``: every output line is prefixed with its task number.
    label = models.BooleanField(default=False)
    #: ``srun --overlap``: the step holds none of the allocation's CPUs and GPUs from other steps.
    overlap = models.BooleanField(default=False)
    #: ``srun --pty``: task 0 runs on a pseudo-terminal of this window size ({"rows", "cols"}) and
    #: only its input and output are srun's (srun's --input/--output/--error=0); None without.
    pty = models.JSONField(null=True, blank=True)
    #: scontrol show step's SrunHost:Pid, TresPerStep and TresPerNode (trainhub.slurm.steps.tres_per).
    srun_host = models.CharField(max_length=255, blank=True)
    srun_pid = models.PositiveIntegerField(default=0)
    tres_per_step = models.CharField(max_length=64, blank=True)
    tres_per_node = models.CharField(max_length=64, blank=True)
    #: srun ``-m``'s node level (block, cyclic, plane: scontrol show step's Dist=); "" without -m.
    distribution = models.CharField(max_length=16, blank=True)
    state = models.CharField(max_length=16, choices=JobState.choices, default=JobState.RUNNING)
    start_time = models.DateTimeField()
    end_time = models.DateTimeField(null=True, blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    exit_signal = models.IntegerField(default=0)

    class Meta:
        ordering = ["job_id", "run_index", "step_id"]
        constraints = [models.UniqueConstraint(fields=["job", "run_index", "step_id"], name="slurm_step_identity")]


class StepNode(models.Model):
    """A step's tasks on one node of the allocation, and their exits once the agent reported them."""

    step = models.ForeignKey(JobStep, on_delete=models.CASCADE, related_name="step_nodes")
    job_node = models.ForeignKey(JobNode, on_delete=models.CASCADE, related_name="step_nodes")
    #: SLURM_NODEID: the node's place in the step's node list.
    node_index = models.PositiveIntegerField()
    #: SLURM_PROCID of each task on the node, in SLURM_LOCALID order.
    task_ids = models.JSONField(default=list)
    gpu_indices = models.JSONField(default=list)
    #: The job's CPUs on the node the step holds while it runs (all of them unless srun --exact).
    cpus = models.PositiveIntegerField(default=0)
    #: [[task, exit code, signal], ...] once every task on the node has ended.
    exits = models.JSONField(null=True, blank=True)
    #: srun was interrupted (SIGINT, SIGTERM): the agent stops the tasks.
    stop_requested = models.BooleanField(default=False)
    #: The signal the tasks get first when stopped (SIGKILL follows after the grace period): SIGTERM,
    #: or SIGINT after srun's second Ctrl-C (``srun: sending Ctrl-C to StepId=J.S``).
    stop_signal = models.PositiveSmallIntegerField(default=15)

    class Meta:
        ordering = ["step_id", "node_index"]
        constraints = [models.UniqueConstraint(fields=["step", "job_node"], name="slurm_step_node_identity")]


class PendingStep(models.Model):
    """An srun waiting for the CPUs or GPUs other steps hold (``scontrol show step``'s ``JOBID.TDB``):
    refreshed at each of srun's requests, gone once its step is created."""

    job = models.ForeignKey(SlurmJob, on_delete=models.CASCADE, related_name="pending_steps")
    run_index = models.PositiveIntegerField()
    srun_host = models.CharField(max_length=255)
    srun_pid = models.PositiveIntegerField()
    node_list = models.CharField(max_length=1024)
    num_nodes = models.PositiveIntegerField()
    num_tasks = models.PositiveIntegerField()
    cpus = models.PositiveIntegerField()
    #: srun's last request: srun asks at least every second while it waits.
    seen = models.DateTimeField()

    class Meta:
        ordering = ["job_id", "run_index", "id"]
        constraints = [models.UniqueConstraint(fields=["job", "run_index", "srun_host", "srun_pid"],
                                               name="slurm_pending_step_identity")]


class StepLogLine(models.Model):
    """A line a step's task printed (srun prints it, prefixed with the task with ``-l``)."""

    step = models.ForeignKey(JobStep, on_delete=models.CASCADE, related_name="log_lines")
    task = models.PositiveIntegerField()
    stream = models.CharField(max_length=8)
    time = models.DateTimeField()
    text = models.TextField()

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["step", "id"], name="slurm_step_log_seq")]


class StepInput(models.Model):
    """What srun --pty sent to task 0's terminal and its agent has not yet delivered, in ``id``
    order: bytes typed (``data``, base64) or a new window size (``rows``, ``cols``). The agent
    acknowledges what it wrote to the terminal and those rows go; srun waits while a step has
    MAX_PENDING_INPUT of them (the buffer is bounded)."""

    step = models.ForeignKey(JobStep, on_delete=models.CASCADE, related_name="inputs")
    data = models.TextField(blank=True)
    rows = models.PositiveIntegerField(null=True, blank=True)
    cols = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["id"]


class JobMail(models.Model):
    """A mail a job's ``--mail-type`` asked for (trainhub.slurm.mail): the outbox row, written in the
    transaction of the transition and sent after commit by a Celery task (``job_mail_send``; a beat
    sweep sends what a down worker or broker missed). ``run_index``/``kind`` make each mail once."""

    class Status(models.TextChoices):
        QUEUED = "QUEUED"
        SENT = "SENT"
        FAILED = "FAILED"
        #: No mail server configured (EMAIL_HOST / EMAIL_BACKEND unset): kept, never sent.
        UNSENT = "UNSENT"

    job = models.ForeignKey(SlurmJob, on_delete=models.CASCADE, related_name="mails")
    run_index = models.PositiveIntegerField(default=0)
    #: BEGIN, END, FAIL, REQUEUE, TIME_LIMIT, TIME_LIMIT_50/80/90.
    kind = models.CharField(max_length=16)
    recipient = models.CharField(max_length=255)
    subject = models.CharField(max_length=255)
    #: When slurmctld sends it: the transition's moment, or a preempted job's requeue at the end of its
    #: GraceTime (not sent before).
    created = models.DateTimeField()
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.QUEUED)
    sent_at = models.DateTimeField(null=True, blank=True)
    error = models.CharField(max_length=255, blank=True, default="")

    class Meta:
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["job", "run_index", "kind"], name="slurm_job_mail_once")]
        indexes = [models.Index(fields=["status", "id"], name="slurm_job_mail_status")]
