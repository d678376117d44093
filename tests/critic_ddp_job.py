"""Worker script for tests/test_credit_critic.py (Lightning re-runs it once per rank):

    python tests/critic_ddp_job.py <out_dir> <overrides...>

Trains credit=turn-critic under the `trainer=` among the overrides with test_credit_critic's ParityReward (a reward
an untrained policy earns, so the value head has something to learn); each rank writes critic<r>.json: its
head's weights at the end and whether its policy was sharded."""

import json
import sys
from pathlib import Path

from torch.distributed.tensor import DTensor

from agentcredit.lit.module import AgentRLModule
from agentcredit.run.train import run
from test_credit_critic import ParityReward
from tiny_runs import tiny_config


def main(out: str, overrides: list[str]) -> None:
    import agentcredit.run.compose

    agentcredit.run.compose.make_reward_fn = lambda env_cfg: ParityReward()

    def on_train_end(self):
        head = {k: v.flatten().tolist() for k, v in self.critic.state_dict().items()}
        sharded = all(isinstance(p, DTensor) for p in self.policy.parameters())
        Path(out, f"critic{self.global_rank}.json").write_text(json.dumps({"head": head, "sharded": sharded}))

    AgentRLModule.on_train_end = on_train_end
    run(tiny_config(Path(out), "credit=turn-critic", "credit.critic_lr=0.05", *overrides))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
