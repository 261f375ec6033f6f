-- side_effects: the side-effect ledger, one row per tool call (session_id, turn_id, tool_call_id), with the HLC of each phase of its life.
-- A row naming only an idempotency key (a third-party acknowledgement, a charge) joins the call that key names in the same turn.
-- HLC columns are packed order_hlc values (see turn_events); null when the phase never happened.
--   session_id: the session.
--   turn_id: the turn.
--   tool_call_id: gen_ai.tool.call.id (a framework tool span without one: its span_id).
--   tool_name: the tool.
--   tier: the reversibility tier, from the spans, else from the tool registry; null when neither says.
--   tier_source: span, registry, or null when the tier is unknown.
--   dispatch: eager / speculative, from the spans, else the registry.
--   billable: whether a commit must be charged, from the spans, else the registry.
--   requires_approval: whether a commit needs approval.granted first (always for hard_irreversible).
--   side_effecting: the tier is above read_only.
--   idempotency_key: turnlens.idempotency_key of the call; null when it never carried one.
--   status: the furthest phase reached: compensated, committed, failed, discarded, prepared, dispatched, buffered; for a framework tool span without lifecycle events: committed (side-effecting tier, inferred), succeeded, failed, running, interrupted (it ended by the cancellation while it ran, with a CancelledError or GeneratorExit, or without its result and nothing after it: whether its side effect happened is unknown), or awaiting_approval (approval.requested, none granted nor denied: the run paused to ask; the call has not run).
--   buffered_hlc: tool.buffered (speculative call queued).
--   dispatched_hlc: tool.dispatched, else the start of a framework tool span.
--   prepared_hlc: tool.prepared.
--   committed_hlc: the first tool.committed; for a framework tool span of a side-effecting tier that ended without
--     error and without lifecycle events, the end of its span (commit_inferred).
--   compensated_hlc: the first tool.compensated.
--   compensation_failed_hlc: the first tool.compensation_failed.
--   discarded_hlc: tool.discarded.
--   failed_hlc: tool.failed.
--   commits: how many tool.committed events the call has.
--   compensations: how many tool.compensated events the call has.
--   tool_cancelled: the tool layer acknowledged a cancel for this call (a framework tool span: it ended by the
--     cancellation, or without its result: inferred_steps_from).
--   approval_requested_hlc: approval.requested for this call.
--   approval_granted_hlc: the first approval.granted for this call.
--   approval_denied_hlc: the first approval.denied for this call.
--   third_party_acks: third_party.ack events naming the call.
--   third_party_unreplayed_acks: acknowledgements not marked replayed (each one executed the call).
--   third_party_status: the status of the latest acknowledgement (e.g. 250 OK).
--   first_ack_hlc: the first third_party.ack.
--   charges: side-effect billing.charged events naming the call.
--   charged_amount: the sum of their turnlens.billing.amount.
--   charged_hlc: the first charge.
--   receipt_hlc: the first transcript.receipt naming the call (shown to the user).
--   partial_stored: a partial.stored event names the call.
--   started_ns: the call's first row, Unix nanoseconds by wall clock.
--   tool_span_ms: wall time from the first tool-layer span start to the last tool-layer span end of the call; null while a tool span is open.
--   open_tool_spans: tool-layer spans of the call that never ended.
--   ordering: hlc when the call's rows carry HLC, wall_clock when none does.
--   commit_inferred: the commit is inferred from a framework's successful tool span, not declared by tool.committed.
-- side_effects_of(rows): the ledger over any relation with turn_events' columns, named by string:
-- divergences passes the turn_events it has already computed, so the events are derived once per query.
create or replace macro side_effects_of(rows) as table
with call_rows as (
    select *
    from query_table(rows)
    where tool_call_id is not null or idempotency_key is not null
),

key_owner as (  -- which call an idempotency key belongs to, within its turn
    select turn_id, idempotency_key, min(tool_call_id) as tool_call_id
    from call_rows
    where tool_call_id is not null and idempotency_key is not null
    group by turn_id, idempotency_key
),

named_rows as (
    select r.* replace (coalesce(r.tool_call_id, k.tool_call_id) as tool_call_id)
    from call_rows as r
    left join key_owner as k
        on r.tool_call_id is null and k.turn_id = r.turn_id and k.idempotency_key = r.idempotency_key
    where coalesce(r.tool_call_id, k.tool_call_id) is not null
),

phases as (
    select
        session_id,
        turn_id,
        tool_call_id,
        min(tool_name) as tool_name,
        min(tier) as span_tier,
        min(dispatch) as span_dispatch,
        bool_or(billable) as span_billable,
        bool_or(requires_approval) as span_requires_approval,
        min(idempotency_key) as idempotency_key,
        min(order_hlc) filter (where step = 'tool.buffered') as buffered_hlc,
        min(order_hlc) filter (where step = 'tool.dispatched') as dispatched_event_hlc,
        min(order_hlc) filter (where source = 'span_start' and layer = 'tool') as tool_span_start_hlc,
        min(order_hlc) filter (where step = 'tool.prepared') as prepared_hlc,
        min(order_hlc) filter (where step = 'tool.committed') as committed_hlc,
        min(order_hlc) filter (where step = 'tool.compensated') as compensated_hlc,
        min(order_hlc) filter (where step = 'tool.compensation_failed') as compensation_failed_hlc,
        min(order_hlc) filter (where step = 'tool.discarded') as discarded_hlc,
        min(order_hlc) filter (where step = 'tool.failed') as failed_hlc,
        count(*) filter (where step = 'tool.committed') as commits,
        count(*) filter (where step = 'tool.compensated') as compensations,
        count(*) filter (where step = 'cancel.acknowledged' and layer = 'tool') > 0 as tool_cancelled,
        min(order_hlc) filter (where step = 'approval.requested') as approval_requested_hlc,
        min(order_hlc) filter (where step = 'approval.granted') as approval_granted_hlc,
        min(order_hlc) filter (where step = 'approval.denied') as approval_denied_hlc,
        count(*) filter (where step = 'third_party.ack') as third_party_acks,
        count(*) filter (where step = 'third_party.ack' and replayed is not true) as third_party_unreplayed_acks,
        arg_max(third_party_status, row(order_hlc, third_party_status)) filter (where step = 'third_party.ack')
            as third_party_status,
        min(order_hlc) filter (where step = 'third_party.ack') as first_ack_hlc,
        count(*) filter (where step = 'billing.charged' and billing_kind is distinct from 'tokens') as charges,
        sum(billing_amount) filter (where step = 'billing.charged' and billing_kind is distinct from 'tokens')
            as charged_amount,
        min(order_hlc) filter (where step = 'billing.charged' and billing_kind is distinct from 'tokens')
            as charged_hlc,
        min(order_hlc) filter (where step = 'transcript.receipt') as receipt_hlc,
        count(*) filter (where step = 'partial.stored') > 0 as partial_stored,
        count(*) filter (where step like 'tool.%') as lifecycle_steps,
        min(wall_ns) as started_ns,
        min(wall_ns) filter (where source = 'span_start' and layer = 'tool') as tool_span_start_ns,
        max(wall_ns) filter (where source = 'span_end' and layer = 'tool') as tool_span_end_ns,
        max(order_hlc) filter (where source = 'span_end' and layer = 'tool') as tool_span_end_hlc,
        count(*) filter (where source = 'span_start' and layer = 'tool')
            - count(*) filter (where source = 'span_end' and layer = 'tool') as open_tool_spans,
        bool_or(status_code = 'error' and layer = 'tool') as tool_span_error,
        bool_or(hlc_source = 'hlc') as has_hlc
    from named_rows
    group by session_id, turn_id, tool_call_id
),

with_registry as (  -- the registry fills in what the spans leave out
    select
        p.*,
        -- asked for approval (a framework's pause: inferred) and not granted it: a framework call has not run
        p.approval_requested_hlc is not null and p.approval_granted_hlc is null as approval_pending,
        coalesce(p.span_tier, r.tier) as tier,
        case when p.span_tier is not null then 'span' when r.tier is not null then 'registry' end as tier_source,
        coalesce(p.span_dispatch, r.dispatch) as dispatch,
        coalesce(p.span_billable, r.billable) as billable,
        coalesce(p.span_requires_approval, r.requires_approval, false)
            or coalesce(p.span_tier, r.tier) = 'hard_irreversible' as requires_approval
    from phases as p
    left join tool_registry_entries as r on r.tool_name = p.tool_name
),

with_commit as (  -- a framework tool span without lifecycle events that ended without error, and not by the
    -- cancellation: for a side-effecting tier, the side effect happened when it ended (inferred: no tool.committed
    -- says so)
    select
        *,
        coalesce(
            committed_hlc is null
                and lifecycle_steps = 0
                and open_tool_spans = 0
                and tool_span_end_hlc is not null
                and not coalesce(tool_span_error, false)
                and not tool_cancelled
                and not approval_pending
                and tier in ('button_reversible', 'soft_irreversible', 'hard_irreversible'),
            false
        ) as commit_inferred
    from with_registry
)

select
    session_id,
    turn_id,
    tool_call_id,
    tool_name,
    tier,
    tier_source,
    dispatch,
    billable,
    requires_approval,
    coalesce(tier in ('button_reversible', 'soft_irreversible', 'hard_irreversible'), false) as side_effecting,
    idempotency_key,
    case
        when compensated_hlc is not null then 'compensated'
        when committed_hlc is not null or commit_inferred then 'committed'
        when failed_hlc is not null then 'failed'
        when discarded_hlc is not null then 'discarded'
        when prepared_hlc is not null then 'prepared'
        when dispatched_event_hlc is not null then 'dispatched'
        when buffered_hlc is not null then 'buffered'
        when open_tool_spans > 0 then 'running'
        when tool_cancelled then 'interrupted'  -- no lifecycle event: a framework's span ended by the cancellation
        when approval_pending and approval_denied_hlc is null then 'awaiting_approval'
        when tool_span_error then 'failed'
        else 'succeeded'
    end as status,
    buffered_hlc,
    coalesce(dispatched_event_hlc, case when lifecycle_steps = 0 then tool_span_start_hlc end) as dispatched_hlc,
    prepared_hlc,
    case when commit_inferred then tool_span_end_hlc else committed_hlc end as committed_hlc,
    compensated_hlc,
    compensation_failed_hlc,
    discarded_hlc,
    failed_hlc,
    case when commit_inferred then 1 else commits end as commits,
    compensations,
    tool_cancelled,
    approval_requested_hlc,
    approval_granted_hlc,
    approval_denied_hlc,
    third_party_acks,
    third_party_unreplayed_acks,
    third_party_status,
    first_ack_hlc,
    charges,
    charged_amount,
    charged_hlc,
    receipt_hlc,
    partial_stored,
    started_ns,
    case when open_tool_spans = 0 then (tool_span_end_ns - tool_span_start_ns) / 1e6 end as tool_span_ms,
    open_tool_spans,
    case when has_hlc then 'hlc' else 'wall_clock' end as ordering,
    commit_inferred
from with_commit;

create or replace view side_effects as
select * from side_effects_of('turn_events');

-- key_facts_of(rows, ledger): what the detectors matching idempotency keys across turns (unbilled_side_effect,
-- billed_not_committed, duplicate_commit, duplicate_compensation) need of each turn, one row per session_id, turn_id
-- and idempotency_key (typed as turnlens_no_key_facts below), over a relation with turn_events' columns and the
-- side_effects computed from it: whether a call with the key was charged, committed, is committed unbilled or charged
-- uncommitted; the third party's acknowledgements not marked replayed, and the compensations, each counted with their
-- first HLC (and its two first, NULLS LAST) and least call id. Facts of several turns add up to those of all of them,
-- so the derived state keeps each turn's (derived/fresh.sql) and a refresh reads those of turns it does not recompute
-- instead of their spans.
create or replace macro key_facts_of(rows, ledger) as table
with acted as (
    select
        session_id, turn_id, idempotency_key,
        count(*) filter (where step = 'third_party.ack' and replayed is not true) as acks,
        min(order_hlc) filter (where step = 'third_party.ack' and replayed is not true) as first_ack_hlc,
        list(order_hlc order by order_hlc nulls last)
            filter (where step = 'third_party.ack' and replayed is not true)[1:2] as ack_hlcs,
        min(tool_call_id) filter (where step = 'third_party.ack' and replayed is not true) as ack_call_id,
        min(tool_name) filter (where step = 'third_party.ack' and replayed is not true) as ack_tool_name,
        count(*) filter (where step = 'tool.compensated') as compensations,
        min(order_hlc) filter (where step = 'tool.compensated') as first_compensation_hlc,
        list(order_hlc order by order_hlc nulls last)
            filter (where step = 'tool.compensated')[1:2] as compensation_hlcs,
        min(tool_call_id) filter (where step = 'tool.compensated') as compensation_call_id
    from query_table(rows)
    where step in ('third_party.ack', 'tool.compensated') and idempotency_key is not null
    group by session_id, turn_id, idempotency_key
),

called as (
    select
        session_id, turn_id, idempotency_key,
        bool_or(charges > 0) as charged,
        bool_or(committed_hlc is not null) as committed,
        bool_or(billable and committed_hlc is not null and compensated_hlc is null and charges = 0) as unbilled_calls,
        bool_or(charges > 0 and committed_hlc is null) as unpaid_calls
    from query_table(ledger)
    where idempotency_key is not null
    group by session_id, turn_id, idempotency_key
)

select
    session_id, turn_id, idempotency_key::varchar as idempotency_key,
    coalesce(charged, false) as charged,
    coalesce(committed, false) as committed,
    coalesce(unbilled_calls, false) as unbilled_calls,
    coalesce(unpaid_calls, false) as unpaid_calls,
    coalesce(acks, 0)::bigint as acks,
    first_ack_hlc::bigint as first_ack_hlc,
    ack_hlcs::bigint[] as ack_hlcs,
    ack_call_id::varchar as ack_call_id,
    ack_tool_name::varchar as ack_tool_name,
    coalesce(compensations, 0)::bigint as compensations,
    first_compensation_hlc::bigint as first_compensation_hlc,
    compensation_hlcs::bigint[] as compensation_hlcs,
    compensation_call_id::varchar as compensation_call_id
from acted
full join called using (session_id, turn_id, idempotency_key);

-- turnlens_no_key_facts: key_facts_of's columns and no row, for divergences_from: its turns are all there are (a
-- table: a file creates one view, the one it documents)
create or replace table turnlens_no_key_facts as
select
    ''::varchar as session_id, ''::varchar as turn_id, ''::varchar as idempotency_key,
    false as charged, false as committed, false as unbilled_calls, false as unpaid_calls,
    0::bigint as acks, 0::bigint as first_ack_hlc, []::bigint[] as ack_hlcs, ''::varchar as ack_call_id,
    ''::varchar as ack_tool_name, 0::bigint as compensations, 0::bigint as first_compensation_hlc,
    []::bigint[] as compensation_hlcs, ''::varchar as compensation_call_id
where false;
