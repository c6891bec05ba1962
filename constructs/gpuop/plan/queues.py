"""The Kueue plan: one ResourceFlavor per GPU pool and its nominal quota, from the pool's capacity.

A device-plugin pool's quota is what its nodes advertise in total (plan/capacity.py: full GPUs, MIG profiles,
shared replicas; at the end of `nodes: {min, max}` spec.queues.quota names). A DRA pool's quota is per
DeviceClass of the pool (plan/dra.py), under the DeviceClass's name as the logical resource: Kueue counts DRA
claims against a ClusterQueue through its Configuration's `resources.deviceClassMappings` (a mapping of the same
name to each DeviceClass; Kueue >= 0.14), which the Kueue installation owns. Pools whose capacity is unknown are
refused by validate/queues.py before this runs.
"""

from __future__ import annotations

from gpuop.plan.model import ClusterCapacity, DraPlan, Flavor, QueuesPlan


def build(spec, capacity: ClusterCapacity, dra: DraPlan | None) -> QueuesPlan | None:
    q = spec.queues
    if not q.enabled:
        return None
    end = 0 if q.quota == "min" else 1
    by_pool = {c.pool: c for c in capacity.pools}
    flavors = []
    for pool in spec.nodePools:
        if pool.allocation == "dra":
            classes = [c for c in (dra.device_classes if dra else ()) if c.pool == pool.name and c.total]
            quota = tuple(sorted((c.name, c.total[end]) for c in classes))
        else:
            total = by_pool[pool.name].total
            quota = tuple(total[end]) if total else ()
        if not quota:
            continue                    # nothing this pool advertises (device plugin off)
        flavors.append(Flavor(name=pool.name, node_labels=tuple(sorted(pool.nodeSelector.items())),
                              tolerations=tuple((t.key, t.value or "", t.effect) for t in pool.taints),
                              quota=quota))
    return QueuesPlan(cluster_queue=q.clusterQueue, local_queue=q.localQueue, namespaces=tuple(q.namespaces),
                      flavors=tuple(flavors), cohort=q.cohort)
