"""A tiny training script for hyperparameter tuning trials, standard library only.

It takes the trial's hyperparameters as the flags Vertex AI (and trainhub) append to the args,
"trains" for a few steps towards score = -(x - 2)^2 - (y + 1)^2 (best: 0 at x=2, y=-1) and reports
the score after every step exactly as cloudml-hypertune's report_hyperparameter_tuning_metric
does: the whole file rewritten, one JSON object per line with sorted keys, the metric tag's value
and global_step as strings. If AIP_MODEL_DIR is set it saves its "model" (the parameters and the
final score) there.

    python3 examples/hptune_quadratic.py --x=1.5 --y=0 [--steps=3] [--metric-tag=score]
"""

import argparse
import json
import os
import time

DEFAULT_METRIC_FILE = "/tmp/hypertune/output.metrics"


def report(path, tag, value, step, trial, history):
    history.append({"timestamp": time.time(), "trial": str(trial), tag: str(float(value)), "global_step": str(step)})
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, exist_ok=True)
    with open(path, "w") as metric_file:
        for entry in history[-100:]:
            metric_file.write(json.dumps(entry, sort_keys=True) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--x", type=float, required=True)
    parser.add_argument("--y", type=float, default=0.0)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--metric-tag", default="score")
    args = parser.parse_args()
    metric_file = os.environ.get("CLOUD_ML_HP_METRIC_FILE", DEFAULT_METRIC_FILE)
    trial = os.environ.get("CLOUD_ML_TRIAL_ID", "0")
    target = -((args.x - 2) ** 2) - (args.y + 1) ** 2
    history = []
    for step in range(1, args.steps + 1):
        # Each step closes half of the remaining gap to the target, as a converging run would.
        score = target - abs(target) / 2 ** step - 1.0 / 2 ** step
        report(metric_file, args.metric_tag, score, step * 100, trial, history)
        print(f"trial {trial} step {step * 100}: {args.metric_tag}={score:.6f}", flush=True)
    model_dir = os.environ.get("AIP_MODEL_DIR")
    if model_dir:
        os.makedirs(model_dir, exist_ok=True)
        with open(os.path.join(model_dir, "model.json"), "w") as model_file:
            json.dump({"x": args.x, "y": args.y, args.metric_tag: score}, model_file)


if __name__ == "__main__":
    main()
