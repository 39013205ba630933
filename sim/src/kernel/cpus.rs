//! Which CPU does what on a host: RX queues spread over CPUs as Linux's default IRQ affinity
//! does, and RPS's choice of a backlog CPU from a packet's flow hash.

use super::config::KernelConfig;

/// A host's CPU layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Cpus {
    /// CPU of each RX queue.
    of_queue: Vec<u16>,
    /// Number of CPUs.
    count: u16,
    /// RPS on: packets go on to the backlog of [`Cpus::rps_target`].
    pub(crate) rps: bool,
}

impl Cpus {
    /// The layout for `queues` RX queues under `cfg`'s `cpus` and `rps` knobs. Queue `q` is
    /// served by CPU `q % cpus`: drivers spread their queue interrupts over CPUs in order
    /// (mlx5 and i40e ask `cpumask_local_spread(q, node)` for queue `q`'s affinity), so with
    /// more queues than CPUs the spread wraps around. `cpus=0`: one CPU per queue.
    pub(crate) fn new(cfg: &KernelConfig, queues: u16) -> Cpus {
        let c = &cfg.load.cpu;
        let count = if c.cpus == 0 { queues.max(1) } else { c.cpus };
        Cpus { of_queue: (0..queues).map(|q| q % count).collect(), count, rps: c.rps }
    }

    /// Number of CPUs.
    pub(crate) fn count(&self) -> u16 {
        self.count
    }

    /// The CPU whose softirq polls RX queue `q`.
    pub(crate) fn of_queue(&self, q: u16) -> u16 {
        self.of_queue[usize::from(q)]
    }

    /// How many RX queues CPU `cpu` polls.
    pub(crate) fn rings_of(&self, cpu: u16) -> u32 {
        self.of_queue.iter().filter(|&&c| c == cpu).count() as u32
    }

    /// The CPU whose backlog RPS picks for a packet of flow hash `hash`: `get_rps_cpu`'s
    /// `map->cpus[reciprocal_scale(hash, map->len)]` with every CPU in `rps_cpus`.
    pub(crate) fn rps_target(&self, hash: u32) -> u16 {
        ((u64::from(hash) * u64::from(self.count)) >> 32) as u16
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(words: &str, queues: u16) -> Cpus {
        let mut cfg = KernelConfig::default();
        cfg.apply_words(words).unwrap();
        Cpus::new(&cfg, queues)
    }

    #[test]
    fn queues_wrap_around_fewer_cpus() {
        let c = layout("cpus=3", 8);
        let of: Vec<u16> = (0..8).map(|q| c.of_queue(q)).collect();
        assert_eq!(of, [0, 1, 2, 0, 1, 2, 0, 1]);
        assert_eq!((c.rings_of(0), c.rings_of(2)), (3, 2));
        let one_each = layout("", 8);
        assert_eq!((one_each.count(), one_each.of_queue(5), one_each.rings_of(5)), (8, 5, 1));
        // More CPUs than queues: the extra CPUs poll no ring (RPS may still use them).
        assert_eq!(layout("cpus=16", 8).rings_of(12), 0);
    }

    #[test]
    fn rps_scales_the_hash_over_every_cpu() {
        let c = layout("cpus=4 rps=on", 8);
        assert_eq!(c.rps_target(0), 0);
        assert_eq!(c.rps_target(u32::MAX), 3);
        assert_eq!(c.rps_target(0x8000_0000), 2);
        assert_eq!(c.rps_target(0x3fff_ffff), 0);
    }
}
