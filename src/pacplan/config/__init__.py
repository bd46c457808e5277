"""A run's configuration: `run` (the YAML run config every stage shares, read and written) and
`training` (its prior-training sections, es and distill, and the strict base they share).

The names a caller needs are here: `from pacplan.config import RunConfig, load_config`.
"""

from pacplan.config.run import (
    BaselineConfig,
    CertificateConfig,
    ExecutorConfig,
    PoliciesConfig,
    ReportConfig,
    RunConfig,
    ScreenConfig,
    SeedRange,
    SeedsConfig,
    StorageConfig,
    WorldConfig,
    config_to_dict,
    dump_config,
    files_read_from,
    load_config,
    parse_config,
    seed_range_size,
)
from pacplan.config.training import DistillConfig, ESConfig, OpeningConfig, StratumConfig

__all__ = ["BaselineConfig", "CertificateConfig", "DistillConfig", "ESConfig", "ExecutorConfig",
           "OpeningConfig", "PoliciesConfig", "ReportConfig", "RunConfig", "ScreenConfig",
           "SeedRange", "SeedsConfig", "StorageConfig", "StratumConfig", "WorldConfig",
           "config_to_dict", "dump_config", "files_read_from", "load_config", "parse_config",
           "seed_range_size"]
