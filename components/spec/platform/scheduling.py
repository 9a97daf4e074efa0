"""How a stack schedules and queues: its PriorityClasses and the Kueue or KAI queue settings
(`Platform.priorityClasses`, `queues`).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Literal, Optional

from pydantic import Field

from ..base import DnsLabel, Model
from ..quantity import Quantity
from ..tenant import PriorityCap


class PriorityClassSpec(Model):
    """A PriorityClass the platform creates."""

    value: Annotated[int, Field(ge=-2147483648, le=1000000000)] = Field(description="priority; higher runs first and may preempt lower")
    preemption_policy: Literal["PreemptLowerPriority", "Never"] = Field("PreemptLowerPriority", description="whether pods of this class evict lower-priority pods to fit")
    description: str = Field(min_length=1, description="what the class is for (shown by kubectl get priorityclass)")
    global_default: bool = Field(False, description="the class of pods that name none (at most one class)")
    default_tenant_cap: Optional[PriorityCap] = Field(
        None, description="cap for tenants that do not list this class (e.g. {pods: 0} to require a grant)"
    )


def default_priority_classes() -> dict[str, PriorityClassSpec]:
    """The PriorityClasses of a stack that lists none.

    >>> sorted(default_priority_classes())
    ['batch', 'interactive', 'online-inference', 'training']
    """
    return {
        "online-inference": PriorityClassSpec(
            value=100000,
            description="Online inference serving users; preempts lower classes. Tenants need a grant.",
            default_tenant_cap=PriorityCap(pods=0),
        ),
        "training": PriorityClassSpec(
            value=50000,
            description="Training and fine-tuning jobs; preempts batch. Tenants need a grant.",
            default_tenant_cap=PriorityCap(pods=0),
        ),
        "interactive": PriorityClassSpec(
            value=40000,
            preemption_policy="Never",
            description="Notebooks and interactive sessions; never preempt others.",
        ),
        "batch": PriorityClassSpec(
            value=10000, description="Evaluation and batch jobs; first to be preempted.", global_default=True
        ),
    }


class KueuePreemption(Model):
    """How a Kueue ClusterQueue frees quota (the v1beta2 `spec.preemption` fields)."""

    reclaim_within_cohort: Literal["Never", "LowerPriority", "Any"] = Field(
        "Any", description="preempt other queues' borrowed workloads to get this queue's own quota back"
    )
    within_cluster_queue: Literal["Never", "LowerPriority", "LowerOrNewerEqualPriority"] = Field(
        "LowerPriority", description="preempt the tenant's own lower-priority workloads"
    )
    borrow_within_cohort: Literal["Never", "LowerPriority"] = Field(
        "Never", description="preempt others' workloads in order to borrow (needs reclaimWithinCohort != Never)"
    )


class KueueSettings(Model):
    """Stack-wide settings of the Kueue objects (used when `scheduler: kueue`)."""

    namespace: DnsLabel = Field(
        "kueue-system",
        description="namespace Kueue runs in (its controller, webhook and their ServiceAccounts); no tenant may hold it",
    )
    preemption: KueuePreemption = KueuePreemption()
    queueing_strategy: Literal["BestEffortFIFO", "StrictFIFO"] = Field("BestEffortFIFO", description="ClusterQueue queueingStrategy: BestEffortFIFO lets smaller workloads pass one that does not fit")


class KaiDepartment(Model):
    """A KAI parent queue: the tenants whose `queue.cohort` names it share its quota.

    Unset amounts are the sum of its tenants' quotas. `gpu` is in KAI's units: whole GPUs, a MIG
    slice counting as its compute slices (1g.10gb = 1, 3g.40gb = 3).
    """

    display_name: str = Field("", description="name shown for the parent queue")
    gpu: Optional[Annotated[Decimal, Field(ge=0)]] = Field(None, description="GPU quota of the department in KAI units; unset: its tenants' sum")
    cpu: Optional[Quantity] = Field(None, description="CPU quota of the department; unset: its tenants' sum")
    memory: Optional[Quantity] = Field(None, description="memory quota of the department; unset: its tenants' sum")
    over_quota_weight: Optional[Annotated[int, Field(ge=0)]] = Field(None, description="default 1")


class KaiSettings(Model):
    """Stack-wide settings of the KAI Scheduler queues (used when `scheduler: kai`)."""

    departments: dict[DnsLabel, KaiDepartment] = Field(
        {}, description="parent queues with explicit quotas, e.g. {research: {gpu: 40}}"
    )
    binder_service_account: Annotated[str, Field(pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?/[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")] = Field(
        "kai-scheduler/binder",
        description="namespace/name of KAI's binder ServiceAccount: the only identity that may write KAI's per-pod "
        "GPU-sharing ConfigMaps in tenant namespaces (the KAI operator's default: kai-scheduler/binder); no tenant may hold "
        "its namespace",
    )
    reservation_namespace: DnsLabel = Field(
        "kai-resource-reservation",
        description="namespace of KAI's GPU-sharing reservation pods (the binder's --resource-reservation-namespace); no "
        "tenant may hold it",
    )


class CohortSettings(Model):
    """A cohort (Kueue) or department (KAI) of the stack: where it nests."""

    parent: Optional[DnsLabel] = Field(
        None,
        description="the cohort this one nests under (Kueue Cohort spec.parentName; KAI: the parent queue of its "
        "department queue); queues borrow across the whole tree; unset: a root",
    )


class QueueSettings(Model):
    """Scheduler queues of the environment: what `scheduler: kueue | kai` builds besides quotas."""

    default_cohort: Optional[DnsLabel] = Field(
        None,
        description="cohort (Kueue) or department (KAI) of tenants without queue.cohort; "
        "unset: Kueue queues borrow from no one, KAI queues go under the department 'tenants' (parent queue dept-tenants)",
    )
    cohorts: dict[DnsLabel, CohortSettings] = Field(
        {},
        description="cohorts (Kueue) or departments (KAI) that nest, e.g. {research: {parent: org}, prod: {parent: org}}; "
        "cohorts named only by tenants are roots",
    )
    spare_cohort: Optional[DnsLabel] = Field(
        None,
        description="Kueue: the cohort whose Cohort object holds every shared pool's spare capacity (what no "
        "ClusterQueue holds nominally), for any queue of its tree that reaches the pool to borrow; "
        "unset: the root of defaultCohort's tree; with neither, spare capacity is not queued (validate warns)",
    )
    kueue: KueueSettings = KueueSettings()
    kai: KaiSettings = KaiSettings()
