//! The memory router's gauges: what each GPU holds and what each placed
//! model holds on it, set from the router at scrape time.

use std::sync::Arc;

use super::{Label, Metrics};
use crate::scheduler::{GpuUsage, RunningModel};

impl Metrics {
    /// Sets the memory router's gauges from `gpus` and `running` (at scrape
    /// time): `llamaswap_placement_gpu_memory_bytes{gpu,kind}` per GPU and
    /// `llamaswap_model_gpu_memory_bytes{model,gpu}` per placed model. Series
    /// of models that stopped go away. Nothing under the other routers.
    pub fn observe_gpus(&self, gpus: &[GpuUsage], running: &[RunningModel]) {
        self.placement_gpu_memory.clear();
        self.model_gpu_memory.clear();
        let id = |gpu: u32| Label::Name(Arc::from(gpu.to_string()));
        let bytes = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        for gpu in gpus {
            for (kind, n) in [
                ("total", gpu.memory),
                ("reserve", gpu.reserve),
                ("used", gpu.used),
                ("free", gpu.free),
            ] {
                self.placement_gpu_memory
                    .get_or_create(&[("gpu", id(gpu.id)), ("kind", kind.into())])
                    .set(bytes(n));
            }
        }
        for model in running {
            let label = self.model_label_of(&model.model);
            for &gpu in &model.gpus {
                self.model_gpu_memory
                    .get_or_create(&[("model", label.clone()), ("gpu", id(gpu))])
                    .set(bytes(model.memory));
            }
        }
    }
}
