"""The order of evidence, read from the Dagster instance: was P_expected fixed before P_observed?"""

from dagster import AssetKey, AssetRecordsFilter, DagsterInstance, EventLogRecord


def metadata_text(record: EventLogRecord | None, key: str) -> str | None:
    value = record.asset_materialization.metadata.get(key) if record and record.asset_materialization else None
    return getattr(value, "value", value)


def metadata_for_agent(record: EventLogRecord | None, key: str, agent: str) -> str | None:
    """A per-agent value: plain when the run materialized one agent, a mapping agent -> value when several."""
    value = metadata_text(record, key)
    return value.get(agent) if isinstance(value, dict) else value


def latest_materialization(instance: DagsterInstance, asset: AssetKey, partition: str) -> EventLogRecord | None:
    records = instance.fetch_materializations(
        AssetRecordsFilter(asset_key=asset, asset_partitions=[partition]), limit=1
    ).records
    return records[0] if records else None


def prior_expected_success(instance: DagsterInstance, expected: AssetKey, agent: str, prereg_sha256: str | None,
                           agent_sha256: str | None, before_timestamp: float | None = None) -> EventLogRecord | None:
    """The latest materialization of `expected` (a condition's expected_success) of this agent under this
    pre-registration and agent registration, before a time if given."""
    records = instance.fetch_materializations(
        AssetRecordsFilter(asset_key=expected, asset_partitions=[agent],
                           before_timestamp=before_timestamp),
        limit=50,
    ).records
    return next((r for r in records if metadata_text(r, "prereg_sha256") == prereg_sha256
                 and metadata_for_agent(r, "agent_sha256", agent) == agent_sha256), None)


def first_expected_success(instance: DagsterInstance, expected: AssetKey, agent: str, prereg_sha256: str | None,
                           agent_sha256: str | None) -> EventLogRecord | None:
    """The earliest materialization of `expected` (a condition's expected_success) of this agent under this pre-registration and agent registration:
    when its prediction was first fixed (a natural trial may be resumed from the journal of an earlier run)."""
    records = instance.fetch_materializations(
        AssetRecordsFilter(asset_key=expected, asset_partitions=[agent]),
        limit=200, ascending=True,
    ).records
    return next((r for r in records if metadata_text(r, "prereg_sha256") == prereg_sha256
                 and metadata_for_agent(r, "agent_sha256", agent) == agent_sha256), None)
