-- turn_usage: one row per turn: tokens streamed and billed, what was charged, and whether usage is known, partial or unknown (never a silent zero).
--   session_id: the session.
--   turn_id: the turn.
--   cancelled: a cancel was requested in the turn (its usage is the one most often unknown).
--   tokens_streamed: the most tokens any stream.progress reported; null when unknown.
--   tokens_streamed_before_cancel: the same, counting only progress before the first cancel.requested; null for a turn not cancelled or without progress before it.
--   tokens_billed: the sum of turnlens.billing.tokens of token charges; null when none was charged (or the sum passes
--     the range of a 64-bit integer).
--   token_cost: the sum of turnlens.billing.amount of token charges; null when none.
--   side_effect_cost: the sum of turnlens.billing.amount of side-effect charges; null when none.
--   total_cost: token_cost (else reported_cost) plus side_effect_cost, nulls counting as nothing; null when none is known.
--   usage: known (tokens were billed, or every model call of a turn not cancelled reported its tokens), partial (only
--     the stream's progress, or some of the model calls, tell how many tokens), unknown (nothing does).
--   input_tokens: the input tokens the turn's model calls reported (GenAI gen_ai.usage.input_tokens, OpenInference
--     llm.token_count.prompt, ...: turn_events); null when none reported any (or the sum passes 64 bits).
--   output_tokens: the same for output tokens.
--   reported_cost: the cost the model calls reported (pydantic-ai / Logfire operation.cost, OpenInference
--     llm.cost.total); null when none did.
-- turn_usage_of(rows, acks): the same rows over any relation with turn_events' columns and one with cancel_acks' columns,
-- each named by string (turn_events and cancel_acks for the view; a named query passes one turn's).
create or replace macro turn_usage_of(rows, acks) as table
with turn_keys as (
    select distinct session_id, turn_id
    from query_table(rows)
),

usage_rows as (
    select
        e.session_id,
        e.turn_id,
        max(e.stream_tokens) filter (where e.step = 'stream.progress') as tokens_streamed,
        max(e.stream_tokens) filter (where e.step = 'stream.progress' and e.order_hlc <= x.requested_hlc)
            as tokens_streamed_before_cancel,
        -- the token sums as BIGINT, the type the derived state's Parquet keeps (a HUGEINT sum is written as DOUBLE)
        try_cast(sum(e.billing_tokens) filter (where e.step = 'billing.charged' and e.billing_kind = 'tokens') as bigint)
            as tokens_billed,
        sum(e.billing_amount) filter (where e.step = 'billing.charged' and e.billing_kind = 'tokens') as token_cost,
        sum(e.billing_amount) filter (where e.step = 'billing.charged' and e.billing_kind is distinct from 'tokens')
            as side_effect_cost,
        try_cast(sum(e.input_tokens) as bigint) as input_tokens,
        try_cast(sum(e.output_tokens) as bigint) as output_tokens,
        sum(e.reported_cost) as reported_cost,
        count(*) filter (where e.model_call) as model_calls,
        count(*) filter (where e.model_call and (e.input_tokens is not null or e.output_tokens is not null))
            as model_calls_reporting
    from query_table(rows) as e
    left join query_table(acks) as x using (session_id, turn_id)
    where e.step in ('stream.progress', 'billing.charged') or e.model_call
    group by e.session_id, e.turn_id
)

select
    t.session_id,
    t.turn_id,
    x.turn_id is not null as cancelled,
    u.tokens_streamed,
    u.tokens_streamed_before_cancel,
    u.tokens_billed,
    u.token_cost,
    u.side_effect_cost,
    case when coalesce(u.token_cost, u.reported_cost) is not null or u.side_effect_cost is not null
        then coalesce(u.token_cost, u.reported_cost, 0) + coalesce(u.side_effect_cost, 0) end as total_cost,
    case
        when u.tokens_billed is not null then 'known'
        when u.model_calls_reporting > 0 and u.model_calls_reporting = u.model_calls and x.turn_id is null then 'known'
        when u.tokens_streamed is not null or u.model_calls_reporting > 0 then 'partial'
        else 'unknown'
    end as usage,
    u.input_tokens,
    u.output_tokens,
    u.reported_cost
from turn_keys as t
left join usage_rows as u using (session_id, turn_id)
left join query_table(acks) as x using (session_id, turn_id);

create or replace view turn_usage as
select * from turn_usage_of('turn_events', 'cancel_acks');
