"""The learner comparison (docs/experiments/learner-comparison.md, RESULTS section 4): MemPO, GRPO, their
no-information control and GRPO on the full context, trained from one warm-up over several seeds and
evaluated on the same held-out questions: ``python -m benchmarks.experiments.learner_comparison``.

- ``settings``: the arms, the evaluation's budget and questions, where the report goes;
- ``comparison``: ``compare`` (train, evaluate, report; its tasks scheduled over processes) and the CLI;
- ``archive``: what a folder holds, and the light archive of finished seeds a fresh machine resumes from;
- ``tables``: the report's tables from the episodes and training logs, and their markdown;
- ``report``: the report and plots rebuilt from a folder, and written into RESULTS.md and the record.
"""
