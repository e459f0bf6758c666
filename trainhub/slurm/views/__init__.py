"""Slurm pages, one module per page group: clusters (list, detail, admin edits), jobs (submit,
detail, actions), reports (squeue, sprio, sshare, sacct, priority breakdown), accounting (sacctmgr
console and admin pages)."""
