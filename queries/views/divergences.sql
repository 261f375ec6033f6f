-- divergences: one row per finding: something the layers of a turn disagree about, or a remedy of the span contract left undone.
-- Each CTE below is one detector of docs/span-contract.md; every detector that compares order needs HLC on both sides, or falls back to wall clock only where the turn has no HLC at all.
--   kind: cancelled_but_committed, cancel_not_propagated, eager_side_effect, untiered_tool, missing_idempotency_key, unapproved_side_effect, unbilled_side_effect, billed_not_committed, tokens_billed_after_cancel, ghost_commit, interrupted_side_effect, duplicate_commit, duplicate_compensation, causal_inversion.
--   severity: critical, high, medium or low.
--   session_id: the session.
--   turn_id: the turn.
--   tool_call_id: the tool call, where the finding is about one.
--   idempotency_key: the call's idempotency key, where it has one.
--   detected_hlc: the packed HLC at which the finding became true.
--   detected_at: the same instant as a timestamp (HLC physical part, close to wall time).
--   evidence: one sentence a person reads: what happened, in what order (and for untiered_tool, what to do).
-- untiered_tool is one finding per tool and UTC day, on the day's first untiered call (its turn and call); a
-- framework's control tools (is_control_tool) are never one.
-- causal_inversion is one finding per turn: two events whose wall clocks contradict their HLC order by more than
-- causal_inversion_tolerance_ms, or a cancel.requested and a tool.dispatched / tool.committed / third_party.ack
-- contradicting it by more than clock_resolution_ms (medium: the wall clocks would give the opposite verdict).

-- untiered_tool_of(calls): the untiered_tool findings, in divergences' columns, over a relation with side_effects'
-- columns, named by string:
-- one per tool and UTC day, on the day's first call (a fleet calls a tool thousands of times; the remedy is one
-- registry entry); a framework's own control tools, called to steer its loop, are no side effect to tier.
-- divergences_of passes the calls of its rows; the derived state's read of divergences (derived/snapshot.sql)
-- passes every stored side_effects row, so the day's first call is found across partitions.
create or replace macro untiered_tool_of(calls) as table
select
    'untiered_tool' as kind,
    'low' as severity,
    -- the first call names the finding whole: of calls at the same HLC the least by session, turn and call (by the
    -- HLC alone, each column could come from another of them, and which one from the order rows came in); its nulls
    -- too (arg_min would take a later call's key where the first call has none)
    arg_min_null(session_id, first_key) as session_id,
    arg_min_null(turn_id, first_key) as turn_id,
    arg_min_null(tool_call_id, first_key)::varchar as tool_call_id,
    arg_min_null(idempotency_key, first_key)::varchar as idempotency_key,
    min(detected_hlc) as detected_hlc,
    epoch_ms(min(detected_hlc) >> 16) as detected_at,
    format('{} has no tier in its spans nor in the tool registry, so turnlens cannot tell whether it changes '
        || 'anything outside (this is its first call of the day; tool_audit counts them all). Add it to '
        || 'tool_registry.toml with its tier (read_only, button_reversible, soft_irreversible or '
        || 'hard_irreversible).',
        coalesce(tool_name, 'An unnamed tool')) as evidence
from (
    select *, row(detected_hlc, session_id, turn_id, tool_call_id) as first_key
    from (
        select *, coalesce(dispatched_hlc, buffered_hlc, prepared_hlc, committed_hlc, failed_hlc) as detected_hlc
        from query_table(calls)
        where tier is null and not is_control_tool(tool_name)
    )
)
group by tool_name, epoch_ms(detected_hlc >> 16)::date;

-- untiered_candidates_of(calls): of the calls untiered_tool_of reads, the first of each tool and UTC day (by the
-- same detected HLC), in side_effects' columns: untiered_tool_of over the candidates of any split of the calls
-- gives what it gives over all of them. A store with derived state keeps each partition's candidates (a rollup),
-- so its read of divergences reads those, not every call of the store.
create or replace macro untiered_candidates_of(calls) as table
select * exclude (detected_hlc)
from (
    select *, coalesce(dispatched_hlc, buffered_hlc, prepared_hlc, committed_hlc, failed_hlc) as detected_hlc
    from query_table(calls)
    where tier is null and not is_control_tool(tool_name)
)
qualify row_number() over (
    partition by tool_name, epoch_ms(detected_hlc >> 16)::date
    order by detected_hlc nulls last, session_id, turn_id, tool_call_id  -- the call untiered_tool_of names
) = 1;

-- divergences_from(rows, ledger, acks): the findings over a relation with turn_events' columns and the side_effects
-- and cancel_acks already computed from it, each named by string: the turns view holds those two anyway, and
-- computing them again here was a third of this macro's cost. The callers pass relations computed once: materialised
-- CTEs (divergences_of, the turns view), or the derived state's fresh part its held tables (derived/fresh.sql); a view
-- that computes its rows would be computed again at each of the many reads below.
-- divergences_beside(rows, ledger, acks, outside) is divergences_from where `outside` names key_facts_of rows of
-- other turns: the cross-turn detectors count them with the facts of the turns given (a turn in both counts as
-- outside's). The derived state's refresh passes the facts of the turns it keeps, so it recomputes only the turns a
-- new span touches, not every turn sharing an idempotency key with one (derived/fresh.sql).
create or replace macro divergences_beside(rows, ledger, acks, outside) as table
with events as not materialized (  -- read where needed, each read projecting its own columns: the caller passes
    -- rows derived once (a materialised CTE, a held table), and a fan-out of every row to five readers cost more
    select * from query_table(rows)
),

calls as (
    select * from query_table(ledger)
),

cancels as (
    select * from query_table(acks)
),

turn_stream as (  -- when each turn's stream ended (stream.completed, else the end of its stream spans)
    select
        turn_id,
        min(order_hlc) filter (where step = 'stream.completed') as completed_hlc,
        max(order_hlc) filter (where source = 'span_end' and layer = 'stream') as stream_span_end_hlc,
        count(*) filter (where source = 'span_start' and layer = 'stream')
            - count(*) filter (where source = 'span_end' and layer = 'stream') as open_stream_spans,
        bool_or(layer = 'stream') as has_stream
    from events
    group by turn_id
),

turn_receipts as (  -- receipts that name no call cover every call of their turn
    select turn_id, min(order_hlc) as receipt_hlc
    from events
    where step = 'transcript.receipt' and tool_call_id is null and idempotency_key is null
    group by turn_id
),

cancelled_but_committed as (
    select
        'cancelled_but_committed' as kind,
        case when c.tier = 'hard_irreversible' then 'critical' else 'high' end as severity,
        c.session_id, c.turn_id, c.tool_call_id, c.idempotency_key,
        greatest(c.committed_hlc, x.requested_hlc) as detected_hlc,
        case
            when c.committed_hlc > x.requested_hlc then format(
                '{} ({}) committed {} ms after the cancel was requested ({}).',
                c.tool_name, c.tier, (c.committed_hlc >> 16) - (x.requested_hlc >> 16), coalesce(x.origin, 'no origin'))
            else format(
                '{} ({}) committed {} ms before the cancel ({}) and was neither compensated nor shown to the user.',
                c.tool_name, c.tier, (x.requested_hlc >> 16) - (c.committed_hlc >> 16), coalesce(x.origin, 'no origin'))
        end as evidence
    from calls as c
    join cancels as x using (session_id, turn_id)
    left join turn_receipts as r using (turn_id)
    where c.side_effecting
        and c.committed_hlc is not null
        and (
            c.committed_hlc > x.requested_hlc
            or (c.compensated_hlc is null and c.receipt_hlc is null and r.receipt_hlc is null)
        )
),

tool_spans_ended as (  -- a read-only call commits nothing: the end of its tool span says it finished
    select turn_id, tool_call_id, max(order_hlc) as ended_hlc
    from events
    where source = 'span_end' and layer = 'tool' and tool_call_id is not null
    group by all
),

running_at_cancel as (  -- tool calls started before the cancel and not finished by it
    select c.session_id, c.turn_id, count(*) as running
    from calls as c
    join cancels as x using (session_id, turn_id)
    left join tool_spans_ended as e using (turn_id, tool_call_id)
    where coalesce(c.dispatched_hlc, c.prepared_hlc) < x.requested_hlc
        and coalesce(
            least(c.committed_hlc, c.failed_hlc, c.discarded_hlc, c.compensated_hlc, e.ended_hlc),
            x.requested_hlc + 1
        ) > x.requested_hlc
    group by all
),

cancel_not_propagated as (
    select
        'cancel_not_propagated' as kind,
        'high' as severity,
        x.session_id, x.turn_id, null as tool_call_id, null as idempotency_key,
        x.requested_hlc as detected_hlc,
        concat_ws(' ',
            format('The cancel ({}) entered at {} and reached {}.',
                coalesce(x.origin, 'no origin'), coalesce(x.requested_layer, 'an unknown layer'),
                array_to_string(x.layers_reached, ', ')),
            case when not list_contains(x.layers_reached, 'runtime') then 'It never reached the agent runtime.' end,
            case when r.running > 0 and not list_contains(x.layers_reached, 'tool')
                then format('{} tool call(s) were running and the tool layer never heard of it.', r.running) end,
            case when len(x.layers_acked) = 0 then 'No layer acknowledged it.' end
        ) as evidence
    from cancels as x
    left join running_at_cancel as r using (session_id, turn_id)
    -- a cancel inferred from a framework's spans: what reached which layer is unknown, not missing
    where coalesce(x.origin, '') not like 'inferred.%'
        and (not list_contains(x.layers_reached, 'runtime')
        or (r.running > 0 and not list_contains(x.layers_reached, 'tool'))
        or len(x.layers_acked) = 0)
),

eager_side_effect as (
    select
        'eager_side_effect' as kind,
        'high' as severity,
        c.session_id, c.turn_id, c.tool_call_id, c.idempotency_key,
        c.dispatched_hlc as detected_hlc,
        format('{} ({}) was dispatched while the stream was still running ({}).',
            c.tool_name, c.tier,
            case when s.completed_hlc is null and s.stream_span_end_hlc is null then 'the stream never ended'
                else format('{} ms before it ended',
                    (coalesce(s.completed_hlc, s.stream_span_end_hlc) >> 16) - (c.dispatched_hlc >> 16)) end
        ) as evidence
    from calls as c
    join turn_stream as s using (turn_id)
    where c.tier in ('soft_irreversible', 'hard_irreversible')
        and c.dispatched_hlc is not null
        and s.has_stream
        and (
            c.dispatched_hlc < coalesce(s.completed_hlc, s.stream_span_end_hlc)
            or (s.completed_hlc is null and (s.stream_span_end_hlc is null or s.open_stream_spans > 0))
        )
),

untiered_tool as (
    select * from untiered_tool_of('calls')
),

missing_idempotency_key as (
    select
        'missing_idempotency_key' as kind,
        'medium' as severity,
        session_id, turn_id, tool_call_id, idempotency_key,
        committed_hlc as detected_hlc,
        format('{} ({}) committed without an idempotency key: a retry would repeat it.', tool_name, tier) as evidence
    from calls
    where side_effecting and committed_hlc is not null and idempotency_key is null
),

unapproved_side_effect as (
    select
        'unapproved_side_effect' as kind,
        'high' as severity,
        session_id, turn_id, tool_call_id, idempotency_key,
        committed_hlc as detected_hlc,
        format('{} ({}) requires approval and committed {}.', tool_name, coalesce(tier, 'untiered'),
            case when approval_granted_hlc is null then 'without any approval.granted'
                else format('{} ms before approval was granted', (approval_granted_hlc >> 16) - (committed_hlc >> 16))
            end) as evidence
    from calls
    where requires_approval
        and committed_hlc is not null
        and (approval_granted_hlc is null or approval_granted_hlc > committed_hlc)
),

key_facts as (  -- each turn's facts of each key: the given turns' own, and outside's (derived/fresh.sql)
    select * from key_facts_of(rows, ledger)
    anti join (select session_id, turn_id from query_table(outside)) using (session_id, turn_id)
    union all by name
    select * from query_table(outside)
),

charged_keys as (  -- a charge may sit in another turn's trace: keys are unique across turns, call ids are not
    select idempotency_key from key_facts where charged
),

committed_keys as (
    select idempotency_key from key_facts where committed
),

unbilled_side_effect as (
    select
        'unbilled_side_effect' as kind,
        'medium' as severity,
        c.session_id, c.turn_id, c.tool_call_id, c.idempotency_key,
        c.committed_hlc as detected_hlc,
        format('{} is billable, committed, was not compensated, and was never charged.', c.tool_name) as evidence
    from calls as c
    where c.billable
        and c.committed_hlc is not null
        and c.compensated_hlc is null
        and c.charges = 0
        and coalesce(c.idempotency_key not in (select idempotency_key from charged_keys), true)
),

billed_not_committed as (
    select
        'billed_not_committed' as kind,
        'high' as severity,
        c.session_id, c.turn_id, c.tool_call_id, c.idempotency_key,
        c.charged_hlc as detected_hlc,
        format('{} was charged {} for {} but the call never committed ({}).',
            c.charges, coalesce(c.charged_amount::varchar, 'an unknown amount'), coalesce(c.tool_name, c.tool_call_id),
            c.status) as evidence
    from calls as c
    where c.charges > 0
        and c.committed_hlc is null
        and coalesce(c.idempotency_key not in (select idempotency_key from committed_keys), true)
),

turn_tokens as (
    select
        e.session_id,
        e.turn_id,
        max(e.stream_tokens) filter (where e.step = 'stream.progress' and e.order_hlc <= x.requested_hlc)
            as streamed_before_cancel,
        count(*) filter (where e.step = 'stream.progress') as progress_events,
        sum(e.billing_tokens) filter (where e.step = 'billing.charged' and e.billing_kind = 'tokens') as billed_tokens,
        max(e.order_hlc) filter (where e.step = 'billing.charged' and e.billing_kind = 'tokens') as billed_hlc
    from events as e
    join cancels as x using (session_id, turn_id)
    where e.step in ('stream.progress', 'billing.charged')
    group by all
),

tokens_billed_after_cancel as (
    select
        'tokens_billed_after_cancel' as kind,
        'medium' as severity,
        session_id, turn_id, null as tool_call_id, null as idempotency_key,
        billed_hlc as detected_hlc,
        format('{} tokens were billed for a cancelled turn that had streamed {} tokens before the cancel.',
            billed_tokens, coalesce(streamed_before_cancel, 0)) as evidence
    from turn_tokens
    where progress_events > 0 and billed_tokens > coalesce(streamed_before_cancel, 0)
),

ghost_commit as (
    select
        'ghost_commit' as kind,
        'critical' as severity,
        session_id, turn_id, tool_call_id, idempotency_key,
        first_ack_hlc as detected_hlc,
        format('The third party acknowledged {} ({}) while the tool layer reports it {}.',
            coalesce(tool_name, tool_call_id), coalesce(third_party_status, 'no status'),
            case when failed_hlc is not null then 'failed'
                when discarded_hlc is not null then 'discarded' else 'cancelled' end) as evidence
    from calls
    where third_party_acks > 0
        and committed_hlc is null
        and (failed_hlc is not null or discarded_hlc is not null or tool_cancelled)
),

interrupted_side_effect as (  -- a framework's tool span ended by the cancel, without its result (status
    -- interrupted): the side effect may or may not have happened, and nothing in the spans says which. A third
    -- party's acknowledgement naming the call settles it (ghost_commit)
    select
        'interrupted_side_effect' as kind,
        case when c.tier = 'button_reversible' then 'medium' else 'high' end as severity,
        c.session_id, c.turn_id, c.tool_call_id, c.idempotency_key,
        greatest(c.dispatched_hlc, x.requested_hlc) as detected_hlc,  -- greatest skips a null
        format('{} ({}) was running when the turn was cancelled ({}) and ended without its result: whether its side '
            || 'effect happened is unknown, and no third party has said. Ask the third party{}.',
            coalesce(c.tool_name, c.tool_call_id), c.tier, coalesce(x.origin, 'no origin'),
            case when c.idempotency_key is not null then format(' (idempotency key {})', c.idempotency_key) else ''
            end) as evidence
    from calls as c
    left join cancels as x using (session_id, turn_id)
    where c.side_effecting
        and c.status = 'interrupted'
        and c.third_party_acks = 0
),

acks_by_key as (  -- the first acknowledgement names the finding: of those at the same HLC, the least session and turn
    select
        idempotency_key,
        sum(f.acks) as executions,  -- qualified: `acks` alone is the macro's argument
        arg_min_null(session_id, row(first_ack_hlc, session_id, turn_id)) as session_id,  -- one row names both
        arg_min_null(turn_id, row(first_ack_hlc, session_id, turn_id)) as turn_id,
        min(ack_call_id) as tool_call_id,
        min(ack_tool_name) as tool_name,
        list_sort(flatten(list(ack_hlcs)), 'ASC', 'NULLS LAST')[2] as second_hlc
    from key_facts as f
    where f.acks > 0
    group by idempotency_key
),

duplicate_commit as (
    select
        'duplicate_commit' as kind,
        'critical' as severity,
        session_id, turn_id, tool_call_id, idempotency_key,
        second_hlc as detected_hlc,
        format('The third party executed idempotency key {} {} times (acknowledgements not marked replayed).',
            idempotency_key, executions) as evidence
    from acks_by_key
    where executions > 1
),

compensations_by_key as (
    select
        idempotency_key,
        sum(compensations) as compensations,
        arg_min_null(session_id, row(first_compensation_hlc, session_id, turn_id)) as session_id,
        arg_min_null(turn_id, row(first_compensation_hlc, session_id, turn_id)) as turn_id,
        min(compensation_call_id) as tool_call_id,
        list_sort(flatten(list(compensation_hlcs)), 'ASC', 'NULLS LAST')[2] as second_hlc
    from key_facts
    where compensations > 0
    group by idempotency_key
),

duplicate_compensation as (
    select
        'duplicate_compensation' as kind,
        'medium' as severity,
        session_id, turn_id, tool_call_id, idempotency_key,
        second_hlc as detected_hlc,
        format('Idempotency key {} was compensated {} times.', idempotency_key, compensations) as evidence
    from compensations_by_key
    where compensations > 1
),

carried_clock as (  -- only rows that carry their own HLC can contradict the wall clock
    select session_id, turn_id, hlc, wall_ns, name, node
    from events
    where hlc is not null
),

skewed_turns as (  -- the turns whose wall clocks can contradict their HLC order by more than the tolerance. Of two
    -- rows in HLC order the earlier's physical HLC is not later, so its wall clock leads the later's by at most the
    -- difference of their offsets (wall clock less physical HLC): a turn whose offsets all lie within the tolerance
    -- has no such pair, and sorting its rows below would find none. (Offsets in double precision: the 1 µs of slack
    -- keeps every turn at the boundary.) Most turns' clocks agree to a millisecond, so this spares most of the sort
    select c.turn_id
    from carried_clock as c, settings as s
    group by c.turn_id, s.causal_inversion_tolerance_ms
    having max(c.wall_ns - (c.hlc >> 16) * 1e6) - min(c.wall_ns - (c.hlc >> 16) * 1e6)
        > s.causal_inversion_tolerance_ms * 1e6 - 1e3
),

wall_before as (  -- in HLC order, the latest wall clock seen before each row (a running max only: arg_max
    -- over the same frame cost ~60 % of the whole view; the earlier row is looked up below for the few inverted rows)
    select
        *,
        max(wall_ns) over (  -- the row itself included: it never exceeds itself, so the test below is the same
            partition by turn_id order by hlc, wall_ns rows between unbounded preceding and current row
        ) as latest_wall_before
    from carried_clock
    semi join skewed_turns using (turn_id)
),

inversions as (  -- per turn, the row the wall clocks contradict most (of equals, the first by HLC), when by more
    -- than normal skew: one aggregate, where numbering every such row in a window sorted them all
    select unnest(worst)
    from (
        select arg_max(
            struct_pack(session_id := w.session_id, turn_id := w.turn_id, hlc := w.hlc, wall_ns := w.wall_ns,
                name := w.name, node := w.node, latest_wall_before := w.latest_wall_before,
                inverted_ns := w.latest_wall_before - w.wall_ns),
            struct_pack(inverted_ns := w.latest_wall_before - w.wall_ns, earlier := -w.hlc, name := w.name, node := w.node)
        ) as worst
        from wall_before as w, settings as s
        where w.latest_wall_before - w.wall_ns > s.causal_inversion_tolerance_ms * 1e6
        group by w.turn_id
    )
),

general_inversion as (
    select
        w.session_id, w.turn_id, w.hlc as detected_hlc, 'low' as severity,
        format('{} on {} comes before {} on {} by HLC, but the wall clocks put it {} ms later.',
            arg_min(e.name, row(e.hlc, e.name, e.node)), arg_min(e.node, row(e.hlc, e.name, e.node)), w.name, w.node,
            round(w.inverted_ns / 1e6, 3)) as evidence
    from inversions as w
    join carried_clock as e  -- the earlier row (by HLC) whose wall clock is that latest one
        on e.turn_id = w.turn_id
        and e.wall_ns = w.latest_wall_before
        and (e.hlc < w.hlc or (e.hlc = w.hlc and e.wall_ns < w.wall_ns))
    group by w.session_id, w.turn_id, w.hlc, w.name, w.node, w.inverted_ns
),

cancel_pair_inversion as (  -- a cancel and a side effect the wall clocks put in the other order: a reader of wall
    -- clocks would reach the other verdict (committed before or after the cancel), so any amount above the
    -- clock's resolution counts
    select
        x.session_id, x.turn_id, greatest(x.hlc, e.hlc) as detected_hlc, 'medium' as severity,
        format('{} on {} comes {} {} on {} by HLC, but the wall clocks put it {} ms {}: read by wall clock, the '
            || 'verdict on the side effect would be the opposite.',
            x.name, x.node, case when x.hlc < e.hlc then 'before' else 'after' end, e.name, e.node,
            round(abs(x.wall_ns - e.wall_ns) / 1e6, 3), case when x.hlc < e.hlc then 'later' else 'earlier' end
        ) as evidence
    from carried_clock as x
    join carried_clock as e on e.turn_id = x.turn_id, settings as s
    where x.name = 'cancel.requested'
        and e.name in ('tool.dispatched', 'tool.committed', 'third_party.ack')
        and ((x.hlc < e.hlc and x.wall_ns > e.wall_ns) or (x.hlc > e.hlc and x.wall_ns < e.wall_ns))
        and abs(x.wall_ns - e.wall_ns) > s.clock_resolution_ms * 1e6
    qualify row_number() over (
        partition by x.turn_id order by abs(x.wall_ns - e.wall_ns) desc, e.hlc, x.hlc, e.name, e.node, x.node
    ) = 1
),

causal_inversion as (  -- one per turn: the cancel pair when there is one (it changes a verdict), else the worst
    select
        'causal_inversion' as kind,
        severity,
        session_id, turn_id, null as tool_call_id, null as idempotency_key,
        detected_hlc,
        evidence
    from (
        select *, 1 as preference from cancel_pair_inversion
        union all by name
        select *, 2 as preference from general_inversion
    )
    qualify row_number() over (partition by turn_id order by preference) = 1
),

findings as (
    select * from cancelled_but_committed
    union all by name select * from cancel_not_propagated
    union all by name select * from eager_side_effect
    union all by name select * from untiered_tool
    union all by name select * from missing_idempotency_key
    union all by name select * from unapproved_side_effect
    union all by name select * from unbilled_side_effect
    union all by name select * from billed_not_committed
    union all by name select * from tokens_billed_after_cancel
    union all by name select * from ghost_commit
    union all by name select * from interrupted_side_effect
    union all by name select * from duplicate_commit
    union all by name select * from duplicate_compensation
    union all by name select * from causal_inversion
)

select
    kind,
    severity,
    session_id,
    turn_id,
    tool_call_id::varchar as tool_call_id,
    idempotency_key::varchar as idempotency_key,
    detected_hlc,
    epoch_ms(detected_hlc >> 16) as detected_at,
    evidence
from findings;

create or replace macro divergences_from(rows, ledger, acks) as table
select * from divergences_beside(rows, ledger, acks, 'turnlens_no_key_facts');

-- divergences_of(rows): the same findings over any relation with turn_events' columns, named by string (turn_events
-- for the view). A detector matching idempotency keys across turns sees only the rows given: a named query for one
-- turn passes the events of the turn's traces and of the traces sharing its keys (key_traces_of).
create or replace macro divergences_of(rows) as table
with divergence_events as materialized (  -- turn_events derived once: the ledger and the cancels are computed from it
    select
        session_id, turn_id, source, step, layer, node, name, wall_ns, hlc, hlc_source, order_hlc, status_code,
        tool_call_id, tool_name, idempotency_key, tier, dispatch, billable, requires_approval, cancel_origin,
        replayed, third_party_status, stream_tokens, billing_kind, billing_amount, billing_tokens
    from query_table(rows)
),

divergence_calls as materialized (  -- each input is computed once, however many detectors read it
    select * from side_effects_of('divergence_events')
),

divergence_cancels as materialized (
    select * from cancel_acks_of('divergence_events')
)

select * from divergences_from('divergence_events', 'divergence_calls', 'divergence_cancels');

create or replace view divergences as
select * from divergences_of('turn_events');
