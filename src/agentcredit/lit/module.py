"""The LightningModule: rollout → reward → credit → clipped loss → log. It holds no formula.

Each training step draws P questions, rolls out G trajectories each with the current weights
(recording the behaviour log-probabilities), asks the chosen credit method (from the registry) for
per-token advantages, and takes one optimiser step on the clipped objective over policy tokens.
Everything a method needs beyond the rollouts (reference scores for TRACE, verified segments for
ProVer) is supplied by `CreditInputs`, chosen by what the registry entry declares, never by name.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import lightning as L
import torch

from agentcredit.agent.engines import build_engine
from agentcredit.agent.rollout import RolloutConfig, RolloutWorker
from agentcredit.agent.trajectory import Trajectory, pad_batch
from agentcredit.credit.config import CreditConfig, loss_settings
from agentcredit.credit.grpo import group_signal_shares
from agentcredit.credit.losses import policy_loss, sampler_gap
from agentcredit.credit.registry import get_credit
from agentcredit.credit.budget import extra_rollouts_at
from agentcredit.lit.credit_inputs import CreditInputs, build_group, extra_rollout_phases
from agentcredit.lit.fsdp2 import FullWeights, clip_gradients
from agentcredit.lit.logprobs import right_padding_only, token_logprobs
from agentcredit.lit.question_outcomes import question_record, save_outcomes
from agentcredit.lit.credit_samples import append_credit_samples, credit_sample_records
from agentcredit.lit.update import (UpdateBatching, UpdateTally, advantage_rows, sequences_with_policy_tokens,
                                     step_denominators)


TEST_STREAM = 1_000_000  # sampling streams of test batches, apart from training (0) and validation (1 + batch)


class NonFiniteTraining(RuntimeError):
    """A step whose loss or gradient is NaN or inf; the run stops before that step is saved."""


# One-rollout outcome of a val/test question -> the name its mean is logged under.
OUTCOME_KEYS = {"correct": "accuracy", "format_valid": "format_valid", "tool_calls": "tool_calls",
                "invalid_tool_calls": "invalid_tool_calls"}


def pooled_outcomes(rows: list[list[float]]) -> tuple[int, dict[str, float]]:
    """Rows of [questions answered, sum of each OUTCOME_KEYS outcome], one per process -> (questions answered in
    all, each outcome's mean over all of them under its logged name)."""
    n = sum(row[0] for row in rows)
    sums = [sum(row[1 + i] for row in rows) for i in range(len(OUTCOME_KEYS))]
    return int(n), {name: total / n for name, total in zip(OUTCOME_KEYS.values(), sums)}


def largest_advantage(advantages: list[torch.Tensor]) -> str:
    """The step's largest |advantage| (or that one is not finite), so a non-finite loss names where it came from."""
    values = [a.detach().double().flatten() for a in advantages if a.numel()]
    if not values:
        return "no advantages"
    every = torch.cat(values)
    if not torch.isfinite(every).all():
        return "an advantage is not finite"
    return f"largest |advantage| {float(every.abs().max()):.3g}"


@dataclass
class TrainSettings:
    micro_batch_size: int = 8  # sequences per forward/backward in the loss
    padding_free: bool | str = "auto"  # micro-batches of equal-length sequences only; auto: on one thread (see micro_batches)
    share_prefixes: bool = True  # each question's shared prefixes run once in the update (one process; prefix_families)
    skip_zero_advantage: bool = True  # rollouts without credit skip the update's forward (_rollouts_to_train)
    lr: float = 1e-6
    weight_decay: float = 0.01
    betas: tuple[float, float] = (0.9, 0.98)
    grad_clip: float = 1.0
    val_temperature: float = 1.0
    samples_per_val: int = 4  # trajectories with per-turn credit written at each validation
    seed: int = 0
    samples_dir: str | None = None


class AgentRLModule(UpdateBatching, L.LightningModule):
    def __init__(self, policy, reference, chat, env_factory, reward_fn, rollout_cfg: RolloutConfig,
                 credit: CreditConfig, settings: TrainSettings, credit_inputs: CreditInputs):
        super().__init__()
        self.policy = policy
        self.reference = reference  # frozen; a plain attribute of a module that is never optimised
        self.chat = chat
        self.env_factory = env_factory
        self.reward_fn = reward_fn
        self.rollout_cfg = rollout_cfg
        self.credit = credit  # split once, by the composition root (compose.build_module)
        self.method = get_credit(self.credit.name)
        self.loss_settings = loss_settings(self.credit)
        # Budget-matched GRPO widens every group (by phase, when matched over phases); other methods add nothing.
        self.extra_rollout_phases = extra_rollout_phases(self.credit.run, rollout_cfg.group_size)
        self.settings = settings
        self.credit_inputs = credit_inputs
        self.critic = credit_inputs.critic  # a learned value head (lit/critic.py), a submodule so checkpoints hold it
        self.automatic_optimization = False  # one update per rollout batch, gradients accumulated over micro-batches
        self._last_samples: list[dict] = []
        self._val_outcomes: list[dict] = []
        self._engine = None  # rollout.engine=vllm: built at the first rollout, from the weights of that moment
        self._engine_step: int | None = None  # global_step whose weights the engine holds

    @property
    def group_size(self) -> int:
        """Rollouts per group at this step: rollout.group_size plus the extra rollouts of the step's phase."""
        return self.rollout_cfg.group_size + extra_rollouts_at(self.extra_rollout_phases, self.global_step)

    # ------------------------------------------------------------------ rollouts
    def _worker(self, temperature: float, stream: int) -> RolloutWorker:
        cfg = RolloutConfig(**{**vars(self.rollout_cfg), "temperature": temperature})
        return RolloutWorker(self.policy, self.chat, self.env_factory, self.reward_fn, cfg, self._generator(stream),
                             engine=self._rollout_engine())

    def _generator(self, stream: int) -> torch.Generator:
        # Sampling randomness is a function of (seed, step, rank): resumed runs sample what uninterrupted ones do.
        seed = hash((self.settings.seed, stream, self.global_step, self.global_rank)) % (2**63)
        return torch.Generator(device=self.device).manual_seed(seed)

    def _rollout_engine(self):
        """The colocated engine holding the current weights (None for rollout.engine=hf). Built lazily,
        so a resumed run's engine starts from the restored weights; synced whenever the step moved on."""
        if self.rollout_cfg.engine == "hf":
            return None
        if self._engine is None:
            self._engine = build_engine(self.rollout_cfg, self.policy, self.chat.tokenizer, seed=self.settings.seed)
            self._engine_step = self.global_step
        elif self._engine_step != self.global_step:
            self._sync_engine()
        return self._engine

    def _sync_engine(self) -> float:
        """Weights from the trainer to the engine; returns the seconds it took (0 without an engine)."""
        if self._engine is None:
            return 0.0
        t0 = time.perf_counter()
        self._engine.load_weights(self.policy)
        self._engine_step = self.global_step
        return time.perf_counter() - t0

    def _per_rank(self, stats: dict, keys: tuple[str, ...]) -> dict:
        """`<key>/rank<r>` for every process (only rank 0 writes the logs); nothing with one process."""
        if self.trainer.world_size == 1:
            return {}
        mine = torch.tensor([float(stats[k]) for k in keys], device=self.device)
        every = self.all_gather(mine).reshape(-1, len(keys)).tolist()  # (world, len(keys))
        return {f"{key}/rank{r}": row[i] for r, row in enumerate(every) for i, key in enumerate(keys)}

    def teardown(self, stage: str) -> None:
        if self._engine is not None:
            self._engine.close()
            self._engine, self._engine_step = None, None

    # ------------------------------------------------------------------ training
    def training_step(self, questions, batch_idx):
        t0 = time.perf_counter()
        self.credit_inputs.start_step()
        self.policy.eval()
        # FSDP2: each process samples its own questions to its own lengths, so on whole (gathered) weights.
        gathered = FullWeights(self.policy)
        worker = self._worker(self.rollout_cfg.temperature, stream=0)
        group_size = self.group_size  # this step's: the optimiser step below moves global_step on
        groups = worker.rollout(questions, group_size)
        t_rollout = time.perf_counter() - t0

        t1 = time.perf_counter()
        credit_groups, group_advantages, group_logs = [], [], []
        for question, trajs in zip(questions, groups):
            group, logs = build_group(self.method, self.credit.run, trajs, question, self.credit_inputs, worker)
            group_advantages.append(self.method.advantages(group, **self.credit.advantage))  # (G, L_group)
            if self.method.diagnostics is not None:
                logs.update(self.method.diagnostics(group, **self.credit.advantage))
            credit_groups.append(group)
            group_logs.append(logs)
        if self.method.step_advantages is not None:  # what depends on the whole step (this process's groups)
            group_advantages = self.method.step_advantages(credit_groups, group_advantages, **self.credit.advantage)
        advantages, trajectories, credit_logs, samples = [], [], [], []
        for question, trajs, adv, logs in zip(questions, groups, group_advantages, group_logs):
            advantages.extend(adv.unbind(0))
            trajectories.extend(trajs)
            # List-valued diagnostics hold one entry per rollout of the group (e.g. TRACE's δ and r per turn).
            extras = [{k: v[j] for k, v in logs.items() if isinstance(v, list)} for j in range(len(trajs))]
            credit_logs.append({k: v for k, v in logs.items() if not isinstance(v, list)})
            samples.append((question, trajs, adv.unbind(0), extras))
        t_credit = time.perf_counter() - t1

        gathered.release()
        t2 = time.perf_counter()
        if self._engine is not None:
            self._engine.sleep()  # GPU with rollout.vllm.sleep_level > 0: the update gets the engine's memory
        self.policy.train()
        stats = self._optimise(trajectories, advantages)
        if self.critic is not None:
            stats.update(self.critic.fit())  # to the λ-returns of the values this step's credit used
        t_update = time.perf_counter() - t2
        if self._engine is not None:
            stats["time/weight_sync_s"] = self._sync_engine()
            stats.update(self._per_rank(stats, ("time/weight_sync_s", "rollout/logprob_gap")))

        self._log_step(trajectories, credit_logs, stats, t_rollout, t_credit, t_update, group_size)
        self._remember_samples(samples)

    @property
    def _world_size(self) -> int:
        """Processes training together (1 without a trainer, as in tests that call the update directly)."""
        return self._trainer.world_size if self._trainer is not None else 1

    @property
    def _sharded(self) -> bool:
        return "FSDP" in type(self.trainer.strategy).__name__

    def _optimise(self, trajectories: list[Trajectory], advantages: list[torch.Tensor]) -> dict:
        """One optimiser step on the clipped objective over the rollouts whose advantages carry a gradient:
        each update batch's loss is back-propagated with its share of the step, then the gradient is
        clipped, checked finite and applied."""
        optimizer = self.optimizers()
        optimizer.zero_grad(set_to_none=True)
        trained = self._rollouts_to_train(advantages)
        total_tokens = sum(t.num_policy_tokens for t in trajectories)
        rollouts = sequences_with_policy_tokens(trajectories)  # a rollout-mean's denominator
        loss_tokens, loss_rollouts = step_denominators(total_tokens, rollouts, self._world_size, self.device)
        step = UpdateTally(total_tokens=total_tokens,
                           trained_tokens=sum(trajectories[i].num_policy_tokens for i in trained),
                           trained_rollouts=sequences_with_policy_tokens([trajectories[i] for i in trained]),
                           rollouts=rollouts,
                           token_mean=self.credit.loss.get("loss_agg", "token-mean") == "token-mean",
                           loss_tokens=loss_tokens, loss_rollouts=loss_rollouts)
        kept = [trajectories[i] for i in trained]
        for batch_indices, plan in self.update_batches(kept):
            indices = [trained[i] for i in batch_indices]
            self._train_on_batch([trajectories[i] for i in indices], [advantages[i] for i in indices], plan, step)
        if not trained:
            # Every gradient is exactly 0. AdamW still takes its step (moments decay, weight decay acts),
            # as it would after running them: it skips parameters without a gradient.
            for p in self.policy.parameters():
                if p.requires_grad and p.grad is None:
                    p.grad = torch.zeros_like(p)
        grad_norm = clip_gradients(self.policy.parameters(), self.settings.grad_clip)
        if not (torch.isfinite(grad_norm) and math.isfinite(step.sums["loss"])):
            # Before the update and before Lightning writes last.ckpt: the last good checkpoint stays as it was.
            raise NonFiniteTraining(
                f"step {self.global_step}: the loss or gradient is not finite (loss={step.sums['loss']}, "
                f"grad_norm={float(grad_norm)}, {largest_advantage(advantages)}); no update was made and the last "
                "checkpoint was kept; lower train.lr, or the credit's own scale (credit.* knobs) where the advantages "
                "are not finite or huge, or resume from an earlier checkpoint")
        optimizer.step()
        return step.figures(grad_norm, kept)

    def _train_on_batch(self, chunk: list[Trajectory], advantages: list[torch.Tensor], plan, step: UpdateTally) -> None:
        """The loss of one update batch, back-propagated with its share of the step's objective."""
        batch = {k: v.to(self.device) for k, v in pad_batch(chunk, self.chat.tokenizer.pad_token_id or 0).items()}
        adv = advantage_rows(advantages, [len(t.input_ids) for t in chunk], batch["loss_mask"]).to(self.device)
        policy_logprobs, forward_tokens = self._logprob_forward(chunk, batch, plan)
        behaviour = batch["old_logprobs"]  # what the sampler recorded
        old = behaviour
        if self.credit.loss.get("tis_cap") is not None:
            # TIS corrects for sampler/trainer mismatch: π_old is recomputed by the trainer itself.
            with torch.no_grad():
                old = policy_logprobs()
        logprobs = policy_logprobs()
        # Before the update the trainer holds the sampler's weights: any gap is sampler/trainer mismatch.
        gap = sampler_gap(logprobs, behaviour, batch["loss_mask"])
        ref_logprobs = None
        if self.credit.loss.get("kl_coef", 0.0) > 0:
            ref_logprobs = self.credit_inputs.reference_token_logprobs(batch["input_ids"], batch["attention_mask"],
                                                                       self.rollout_cfg.temperature)
        loss, stats = policy_loss(logprobs, old, adv, batch["loss_mask"], ref_logprobs=ref_logprobs,
                                  behaviour_logprobs=behaviour, turn_ids=batch["turn_ids"], **self.loss_settings)
        rows = sequences_with_policy_tokens(chunk)  # the rows policy_loss's rollout-mean averages over
        share = step.loss_share(batch["loss_mask"], rows)
        self.manual_backward(loss * share)
        step.add_batch(loss, share, stats, gap, batch["loss_mask"], rows, forward_tokens)

    def _logprob_forward(self, chunk: list[Trajectory], batch: dict, plan):
        """The batch's log-probability forward (a function, as TIS runs it twice) and the tokens it runs on."""
        temperature = self.rollout_cfg.temperature
        if plan is not None:
            forward_tokens = sum(len(chunk[i].input_ids) - n for i, _, n in plan)
            return (lambda: self._shared_logprobs(chunk, batch, plan, temperature)), forward_tokens
        # Log-probabilities are needed on policy tokens only; FSDP must run the whole wrapped forward.
        positions = None if self._sharded else batch["loss_mask"]
        # A right-padded batch whose pads nothing reads runs maskless and causal (right_padding_only):
        # the same log-probabilities and gradients, without attending over the upper triangle.
        mask = batch["attention_mask"]
        if positions is not None and right_padding_only(mask):
            mask = None
        return (lambda: token_logprobs(self.policy, batch["input_ids"], mask, temperature, positions)), \
            int(batch["attention_mask"].sum())

    def _log_step(self, trajectories, credit_logs, stats, t_rollout, t_credit, t_update, group_size: int):
        rewards = torch.tensor([t.reward for t in trajectories])
        n = len(trajectories)
        mean = lambda key: sum(float(t.diagnostics.get(key, 0)) for t in trajectories) / n  # noqa: E731
        metrics = {
            "train/reward": rewards.mean(),
            "train/accuracy": (rewards >= self.reward_fn.correct_score).float().mean(),
            "train/loss": stats.pop("loss"),
            "rollout/tool_calls": mean("num_tool_turns"),
            "rollout/invalid_tool_calls": mean("invalid_tool_calls"),
            "rollout/format_valid": mean("answer_format_valid"),
            "rollout/policy_tokens": mean("policy_tokens"),
            "rollout/length": sum(len(t.input_ids) for t in trajectories) / n,
            "time/rollout_s": t_rollout,
            "time/credit_s": t_credit,
            "time/update_s": t_update,
            "time/step_s": t_rollout + t_credit + t_update,
            "rollout/group_size": float(group_size),
        }
        metrics.update({k if "/" in k else f"train/{k}": v for k, v in stats.items()})
        groups = torch.tensor([t.group for t in trajectories])
        metrics["train/groups_with_signal"], metrics["train/groups_mixed"] = group_signal_shares(
            rewards, groups, self.reward_fn.correct_score)
        scalar_logs: dict[str, list[float]] = {}
        for logs in credit_logs:
            for key, value in logs.items():
                scalar_logs.setdefault(key, []).append(float(value))
        metrics.update({key if "/" in key else f"credit/{key}": sum(v) / len(v) for key, v in scalar_logs.items()})
        # Everything the policy sampled this step: the trained rollouts and any continuations (ProVer, SPO-chain).
        metrics["rollout/generated_tokens"] = float(sum(t.num_policy_tokens for t in trajectories)
                                                    + sum(scalar_logs.get("extra_tokens", [])))
        if self.method.step_metrics is not None:
            metrics.update({f"credit/{k}": v for k, v in self.method.step_metrics(scalar_logs).items()})
        # Straight to the loggers, not through self.log_dict: Lightning keeps a step metric's last value and
        # logs it again at later steps that did not measure it (ProVer's judge metrics at a step without an
        # eligible group). A metric a step did not measure must be absent from that step's row.
        connector = self.trainer._logger_connector
        if connector.should_update_logs:
            connector.log_metrics({k: float(v) for k, v in metrics.items()})
        self.log("reward", metrics["train/reward"], prog_bar=True, on_step=True, logger=False, batch_size=n)

    def _remember_samples(self, samples):
        self._last_samples = credit_sample_records(samples, self.settings.samples_per_val, int(self.global_step))

    # ------------------------------------------------------------------ validation
    def validation_step(self, batches, batch_idx):
        """`batches`: (index, questions) pairs (data.val_batches_per_call of them), rolled out in one call, each
        batch from its own stream 1 + index: the outcomes of one call per batch, whatever the number per call."""
        questions, streams = self._batches_on_streams(batches, first_stream=1)
        self._evaluate(questions, stream=1 + batches[0][0], generators=streams)

    def _batches_on_streams(self, batches, first_stream: int) -> tuple[list, list[torch.Generator]]:
        """(index, questions) pairs -> their questions, and for each the generator of its batch's stream
        first_stream + index (one generator per batch, shared by its questions)."""
        questions = [q for _, batch in batches for q in batch]
        streams = [stream for index, batch in batches for stream in [self._generator(first_stream + index)] * len(batch)]
        return questions, streams

    def _evaluate(self, questions, stream: int, generators: list | None = None, samples: int = 1):
        worker = self._worker(self.settings.val_temperature, stream=stream)
        with torch.no_grad(), FullWeights(self.policy):
            groups = worker.rollout(questions, samples, generators)
        # One record per question, its outcomes the means over its samples (lit/question_outcomes.py).
        self._val_outcomes.extend(question_record(q, trajs, self.reward_fn.is_success) for q, trajs in zip(questions, groups))

    def _log_outcomes(self, prefix: str, count_as: str | None = None) -> bool:
        """Means of the collected one-rollout outcomes as `<prefix>/accuracy`, `format_valid`, `tool_calls`,
        `invalid_tool_calls` (and, with `count_as`, how many questions all processes answered as
        `<prefix>/<count_as>`); False when nothing was collected. With several processes the means are over
        every question answered, not a mean of each process's mean (shares can differ by one question)."""
        if not self._val_outcomes:
            return False
        totals = torch.tensor([[len(self._val_outcomes), *(sum(o[k] for o in self._val_outcomes) for k in OUTCOME_KEYS)]],
                              dtype=torch.float64, device=self.device)
        if self.trainer.world_size > 1:
            totals = self.all_gather(totals).reshape(-1, 1 + len(OUTCOME_KEYS))
        n, means = pooled_outcomes(totals.tolist())
        # every process now holds the same figures, so the mean over processes that sync_dist takes is them
        self.log_dict({f"{prefix}/{name}": value for name, value in means.items()}, sync_dist=True, batch_size=n)
        if count_as:
            self.log(f"{prefix}/{count_as}", float(n), sync_dist=True, batch_size=n)
        if self.settings.samples_dir is not None and not self.trainer.sanity_checking:
            save_outcomes(self._val_outcomes, self.settings.samples_dir, prefix, self.global_step,
                          self.trainer.world_size, self.global_rank)
        self._val_outcomes = []
        return True

    def on_validation_epoch_end(self):
        if self._log_outcomes("val"):
            self._write_samples()

    def test_step(self, batches, batch_idx):
        """Held-out evaluation after training (``final_test``): k rollouts per test question
        (data.test_samples_per_question; k = 1 samples what one rollout per question always did). `batches` are
        (index, questions) pairs (datamodule's IndexedBatches), rolled out in one call, each batch from its own
        stream TEST_STREAM + index: the outcomes of one call per batch (data.test_batches_per_call)."""
        questions, streams = self._batches_on_streams(batches, first_stream=TEST_STREAM)
        samples = int(getattr(self.trainer.datamodule, "test_samples_per_question", 1))
        self._evaluate(questions, stream=TEST_STREAM + batches[0][0], generators=streams, samples=samples)

    def on_test_epoch_end(self):
        self._log_outcomes("test", count_as="n")

    def _write_samples(self):
        if self.settings.samples_dir is not None and self.global_rank == 0:
            append_credit_samples(self._last_samples, self.settings.samples_dir)

    def on_save_checkpoint(self, checkpoint):
        if self.critic is not None:
            checkpoint["critic_optimizer"] = self.critic.optimizer_state()

    def on_load_checkpoint(self, checkpoint):
        if self.critic is not None:
            self.critic.load_optimizer_state(checkpoint.get("critic_optimizer"))
        # Before Lightning loads it: weights of another shape, none at all, or no optimiser state would be
        # a long traceback from load_state_dict or the loops; here they are one CheckpointError line.
        from agentcredit.common.checkpoint_file import CheckpointError, resume_problem, state_dict_problem

        if self._sharded:
            return  # sharded weights (DTensor): the strategy's own loader compares the whole ones it reads
        fitting = getattr(self.trainer.state.fn, "value", None) == "fit"
        check = resume_problem if fitting else state_dict_problem
        problem = check(self.state_dict(), checkpoint if fitting else checkpoint.get("state_dict"), self.strict_loading)
        if problem:
            raise CheckpointError(f"{self.trainer.ckpt_path} cannot be loaded into this run: {problem}; resume with "
                                  "the model overrides the run was trained with, from a checkpoint train.py wrote")

    # ------------------------------------------------------------------ optimiser
    def configure_model(self):
        # trainer=fsdp (lit/fsdp2.FSDP2Strategy) shards the policy here, once the process group exists.
        shard = getattr(self.trainer.strategy, "shard_policy", None)
        if shard is not None:
            shard(self.policy)

    def configure_optimizers(self):
        s = self.settings
        return torch.optim.AdamW(self.policy.parameters(), lr=s.lr, weight_decay=s.weight_decay, betas=tuple(s.betas))
