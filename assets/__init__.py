import warnings

from dagster import BetaWarning, PreviewWarning

# We rely deliberately on two flagged APIs: MultiToSingleDimensionPartitionMapping (beta) and
# partitions_def on asset checks (preview); both are the documented way to express our graph.
warnings.filterwarnings("ignore", category=BetaWarning)
warnings.filterwarnings("ignore", category=PreviewWarning)
