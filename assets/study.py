"""The asset graph of one study (DESIGN §8): the protocol, the shared checkpoint trials, one branch per
condition, then the contrasts, the sensitivity sweep and the report. Each part lives in its own module
(protocol, trials, conditions, aggregates, report); this one puts them together for a study.
"""

import warnings

from dagster import AssetsDefinition, BetaWarning, MultiPartitionsDefinition, PreviewWarning

from assets.aggregates import aggregate_assets
from assets.common import in_namespace
from assets.conditions import condition_branch
from assets.partitions import agents_of
from assets.protocol import protocol_assets
from assets.report import report_asset
from assets.trials import trial_assets
from hrbench.catalogue import StudyNames
from hrbench.preregistration import code_version


def build_study_assets(names: StudyNames, agent_task: MultiPartitionsDefinition, conditions: list[str],
                       prefix_rollouts: bool = False, depth: bool = False) -> list[AssetsDefinition]:
    """The assets, bound to the study's task partitions and conditions (each condition its own branch), keyed in
    the study's namespace (`<study>/<catalogue key>`).

    `prefix_rollouts`: a `matched` checkpoint protocol needs recorded transcripts (`solution_conditioned`:
    the agent's own passing workspaces), so rollouts that only provide them run before the checkpoint
    trials (their outcomes are never observed as P_obs).
    `depth`: the study declares `depth:`, so a `task_depth` asset measures D of its tasks.
    """
    version = code_version().label
    with warnings.catch_warnings():
        # Beta/preview parameters we rely on deliberately: single-run backfill policies, automation conditions.
        warnings.simplefilter("ignore", BetaWarning)
        warnings.simplefilter("ignore", PreviewWarning)
        return in_namespace([
            *protocol_assets(agents_of(agent_task), version, depth), *trial_assets(agent_task, version, prefix_rollouts),
            *(a for condition in conditions for a in condition_branch(condition, agent_task, version)),
            *aggregate_assets(agent_task, conditions, version), report_asset(conditions, version, depth)], names)
