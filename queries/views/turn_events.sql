-- turn_events: one row per thing that happened in a turn: each span's start and end, and each span event, with the contract's attributes typed.
-- A lifecycle step emitted as its own span (named like the event, e.g. `tool.committed`) is a step at its start.
--   session_id: the session, resolved as in spans.
--   turn_id: the turn, resolved as in spans.
--   trace_id: the trace of the span the row comes from.
--   span_id: the span the row comes from.
--   parent_span_id: that span's parent.
--   source: span_start, span_end, event, or inferred (a cancel, or a request for approval, a framework's spans show
--     without declaring it: inferred_steps_from).
--   event_index: the event's position in its span (1-based); 0 for a span start, null for a span end.
--   name: the event name, or the span name for span starts and ends.
--   step: the contract step this row is (cancel.requested, tool.committed, ...); null for plain span starts and ends,
--     and for the events frameworks log that are no step (exception, stream chunks, GenAI content events).
--   layer: the span's layer (http, stream, runtime, tool, third_party, billing); null when nothing tells.
--   node: service.instance.id (else service.name): whose clock stamped the row.
--   service_name: service.name of the emitting resource.
--   span_name: the span's name.
--   span_kind: the span's OTLP kind.
--   status_code: the span's status (unset / ok / error).
--   wall_ns: when it happened by the emitting node's wall clock, Unix nanoseconds.
--   hlc: the HLC the row carries itself (the event's turnlens.hlc, or the span's for its start); null when none, or
--     when the value cannot be an HLC (turnlens_hlc: negative, or past April 2262).
--   hlc_source: hlc (carried), span_clock (span's HLC plus wall time elapsed in the span) or wall_clock (no HLC at all).
--   order_hlc: the packed HLC the timelines sort on: hlc, else derived as hlc_source says.
--   hlc_ms: the physical part of order_hlc, Unix milliseconds.
--   skew_ms: the carried HLC's physical part minus the row's own wall clock, in ms; null without a carried HLC.
--   tool_call_id: gen_ai.tool.call.id (of the event, else of its span; OpenInference's tool_call.id); a framework tool
--     span without one takes the id of the call the model requested for that tool in the turn (the n-th run of a
--     tool the n-th request of it: llm.output_messages...tool_call.id, gen_ai.output.messages), else its span_id.
--     None on ADK's span around a batch of parallel calls (tool '(merged tools)'): each call has its own span.
--     ADK's '<not specified>' (a tool the stop cut short) is no call id (tool_call_id_of).
--     An inferred row of a tool span (a cancellation that stopped the tool) names the span's call.
--   tool_name: gen_ai.tool.name, else OpenInference tool.name (none on ADK's batch span).
--   idempotency_key: turnlens.idempotency_key.
--   tier: turnlens.tool.tier as the span says it (the registry fills gaps later, in side_effects).
--   dispatch: turnlens.tool.dispatch (eager / speculative).
--   billable: turnlens.tool.billable.
--   requires_approval: turnlens.tool.requires_approval.
--   cancel_origin: turnlens.cancel.origin (user_clicked / user_typed / timeout / client_disconnect).
--   finish_reason: the first of gen_ai.response.finish_reasons (stop / cancelled / error; also when a framework sends
--     the list as JSON text); on a model call's span, its finish reason as the framework's convention gives it.
--   stream_tokens: turnlens.stream.tokens, tokens sent so far.
--   third_party_status: turnlens.third_party.status (e.g. 250 OK).
--   replayed: turnlens.third_party.replayed: the idempotency key de-duplicated this acknowledgement.
--   billing_kind: turnlens.billing.kind (tokens / side_effect).
--   billing_amount: turnlens.billing.amount.
--   billing_tokens: turnlens.billing.tokens.
--   input_kind: turnlens.input.kind (message / typing).
--   attributes: the row's own attributes as JSON (the event's, or the span's for starts and ends).
--   input_tokens: on a model call's span start, the input tokens it reports (gen_ai.usage.input_tokens,
--     OpenInference llm.token_count.prompt, gen_ai.usage.prompt_tokens); null elsewhere or when not reported.
--   output_tokens: the same for output tokens (gen_ai.usage.output_tokens, llm.token_count.completion,
--     gen_ai.usage.completion_tokens).
--   reported_cost: on a model call's span start, the cost it reports (pydantic-ai / Logfire operation.cost,
--     OpenInference llm.cost.total).
--   model_call: the row is a model call's span start (is_model_span).
-- What the agent frameworks' own conventions say, read where the span contract is silent (docs/frameworks.md):
-- which spans are model calls and agent runs, which model calls completed, which tool calls the model requested,
-- how many tokens a model call used, and the cancellations their spans let one infer.

-- is_model_span(attributes): a model call: GenAI chat / text_completion / generate_content, OpenInference LLM,
-- Traceloop's llm.request.type.
create or replace macro is_model_span(attributes) as (
    coalesce(
        json_extract_string(attributes, '$."gen_ai.operation.name"') in ('chat', 'text_completion', 'generate_content')
        or json_extract_string(attributes, '$."openinference.span.kind"') = 'LLM'
        or json_extract_string(attributes, '$."llm.request.type"') in ('chat', 'completion'),
        false
    )
);

-- is_tool_batch(tool_name): ADK's span around a batch of parallel calls, which names the placeholder tool
-- '(merged tools)' and the batch's event id as its call id: no call of its own, each call has its own span.
create or replace macro is_tool_batch(tool_name) as (
    coalesce(tool_name = '(merged tools)', false)
);

-- is_control_tool(tool_name): a tool an agent framework gives its model to steer its own loop, which changes
-- nothing outside: smolagents' final_answer, pydantic-ai's final_result, ADK's transfer_to_agent (a handoff to
-- another agent), exit_loop (out of a LoopAgent) and set_model_response (a structured answer beside tools).
create or replace macro is_control_tool(tool_name) as (
    coalesce(tool_name in ('final_answer', 'final_result', 'transfer_to_agent', 'exit_loop', 'set_model_response'),
        false)
);

-- tool_call_of(call_id, tool_name, layer, requested_call_id, span_id): the tool call a row belongs to: the call id
-- it or its span names; else, on a tool span naming a tool, the id of the call the model requested for it
-- (requested_call_id), else the span's own id. None on ADK's batch span (is_tool_batch).
create or replace macro tool_call_of(call_id, tool_name, layer, requested_call_id, span_id) as (
    case when not is_tool_batch(tool_name) then coalesce(
        call_id, case when layer = 'tool' and tool_name is not null then coalesce(requested_call_id, span_id) end
    ) end
);

-- json_text(value): an attribute's string value that is itself JSON text (a list a framework sends as text), else
-- null: text that only looks like JSON (a stray `[`, a cut-off list) counts as absent rather than failing the query.
create or replace macro json_text(value) as (
    case when json_valid(value) then value end
);

-- model_finish_reason(attributes): the first finish reason of a model call: gen_ai.response.finish_reasons (a list,
-- or Logfire's JSON text of one), else the finish_reason of gen_ai.output.messages, else Traceloop's
-- gen_ai.completion.0.finish_reason, else LangSmith's gen_ai.completion (the LangChain LLMResult as JSON: its first
-- generation's generation_info.finish_reason); an OpenInference model call with output (messages, output.value, or a
-- completion token count when content is hidden) counts as `stop`.
create or replace macro model_finish_reason(attributes) as (
    coalesce(
        json_extract_string(attributes, '$."gen_ai.response.finish_reasons"[0]'),
        json_extract_string(json_text(json_extract_string(attributes, '$."gen_ai.response.finish_reasons"')), '$[0]'),
        case when starts_with(json_extract_string(attributes, '$."gen_ai.response.finish_reasons"'), '[') then null
            else json_extract_string(attributes, '$."gen_ai.response.finish_reasons"') end,
        -- Traceloop writes an empty finish reason for a stream cut short
        nullif(json_extract_string(json_text(json_extract_string(attributes, '$."gen_ai.output.messages"')),
            '$[-1].finish_reason'), ''),
        nullif(json_extract_string(attributes, '$."gen_ai.completion.0.finish_reason"'), ''),
        case when contains(attributes, '"langsmith.span.kind"') then nullif(json_extract_string(
            json_text(json_extract_string(attributes, '$."gen_ai.completion"')),
            '$.generations[0][0].generation_info.finish_reason'), '') end,
        case when json_extract_string(attributes, '$."llm.output_messages.0.message.role"') is not null
            or json_extract_string(attributes, '$."output.value"') is not null
            or json_extract_string(attributes, '$."llm.token_count.completion"') is not null then 'stop' end
    )
);

-- tool_call_id_of(text): a span's gen_ai.tool.call.id, but for ADK's placeholder '<not specified>', which ADK
-- writes on a tool span whose tool gave no response (the stop cut it short): no call id, whose every stopped call of
-- a turn would share.
create or replace macro tool_call_id_of(text) as (
    nullif(text, '<not specified>')
);

-- is_openinference_tool(attributes): an OpenInference tool span (openinference.span.kind TOOL).
create or replace macro is_openinference_tool(attributes) as (
    coalesce(
        contains(attributes, '"TOOL"')  -- cheap: most spans are no tool
        and json_extract_string(attributes, '$."openinference.span.kind"') = 'TOOL',
        false
    )
);

-- is_adk_answered_tool(attributes, status_code): Google ADK's execute_tool span (ADK writes its event id on it)
-- whose call ADK named from the tool's response (not its '<not specified>'), that did not fail, and is neither
-- ADK's span around a batch of parallel calls nor a control tool.
create or replace macro is_adk_answered_tool(attributes, status_code) as (
    coalesce(
        status_code is distinct from 'error'
        and contains(attributes, 'gcp.vertex.agent.event_id')  -- cheap: most spans are no ADK tool
        and json_extract_string(attributes, '$."gen_ai.operation.name"') = 'execute_tool'
        and tool_call_id_of(json_extract_string(attributes, '$."gen_ai.tool.call.id"')) is not null
        and not is_tool_batch(json_extract_string(attributes, '$."gen_ai.tool.name"'))
        and not is_control_tool(json_extract_string(attributes, '$."gen_ai.tool.name"')),
        false
    )
);

-- is_resultless_tool(attributes, status_code): a tool span that ended without the call's result and did not fail.
-- An OpenInference tool span that records the call's input but not its result (input.value without output.value):
-- the OpenAI Agents SDK ends the span of a tool the stop interrupted that way, with an ok status (its spans record
-- no exception); a span with neither records no content at all (the SDK's trace_include_sensitive_data off) and
-- says nothing. Traceloop's tool span (traceloop.span.kind tool) alike: traceloop.entity.input without
-- traceloop.entity.output, its status unset. Or Google ADK's execute_tool span whose gen_ai.tool.call.id is
-- '<not specified>': ADK names the call from the tool's response as the span ends, and a tool the stop cut short
-- gave none (the status stays unset and no exception is recorded, since ADK records an Exception only and a
-- cancellation is none). Or LangSmith's tool span (langsmith.span.kind tool) whose recorded outputs are empty
-- (gen_ai.completion `{}`): a run ended by an exception (a stop, LangGraph's interrupt()) has none; a span without
-- gen_ai.completion hides its outputs and says nothing.
create or replace macro is_resultless_tool(attributes, status_code) as (
    coalesce(
        status_code is distinct from 'error'
        and (
            (is_openinference_tool(attributes)
                and json_exists(attributes, '$."input.value"') and not json_exists(attributes, '$."output.value"'))
            or (contains(attributes, 'traceloop.entity.input')
                and json_extract_string(attributes, '$."traceloop.span.kind"') = 'tool'
                and not json_exists(attributes, '$."traceloop.entity.output"'))
            or (contains(attributes, '<not specified>')
                and json_extract_string(attributes, '$."gen_ai.tool.call.id"') = '<not specified>'
                and json_extract_string(attributes, '$."gen_ai.operation.name"') = 'execute_tool')
            or (contains(attributes, '"langsmith.span.kind"')
                and json_extract_string(attributes, '$."langsmith.span.kind"') = 'tool'
                and json_extract_string(attributes, '$."gen_ai.completion"') = '{}')
        ),
        false
    )
);

-- is_exception_of(attributes, names): an exception event of one of `names` (a regular-expression alternation of
-- class names): its exception.type names one, whatever module path precedes it, or its message begins with one, as
-- LangSmith writes a run's error (exception.type `Exception`, exception.message `CancelledError()` and the
-- traceback).
create or replace macro is_exception_of(attributes, names) as (
    coalesce(
        regexp_matches(json_extract_string(attributes, '$."exception.type"'), '(^|[.\s])(' || names || ')\b')
            or regexp_matches(json_extract_string(attributes, '$."exception.message"'),
                '^([\w.]*\.)?(' || names || ')\b'),
        false
    )
);

-- LangGraph's exceptions for a run pausing to ask a person (interrupt(): GraphInterrupt, or the older
-- NodeInterrupt). OpenInference records one as an exception event of the span interrupt() was called in, whose status
-- stays ok; LangSmith as its message.
create or replace macro graph_interrupts() as ('GraphInterrupt|NodeInterrupt');

-- The exceptions that mean "cancelled": asyncio's CancelledError, a generator closed early (GeneratorExit).
create or replace macro cancellations() as ('CancelledError|GeneratorExit');

-- is_cancellation(text): a status message naming a cancellation, whatever module path precedes it.
create or replace macro is_cancellation(text) as (
    coalesce(regexp_matches(text, '(^|[.\s])(' || cancellations() || ')\b'), false)
);

-- requested_tool_calls(attributes): [{id, name}] of the tool calls a model call asked for: OpenInference's
-- llm.output_messages.N.message.tool_calls.M.tool_call.{id, function.name}, Traceloop's
-- gen_ai.completion.N.tool_calls.M.{id, name}, the GenAI gen_ai.output.messages tool_call parts. A key with a `"`
-- in it (no JSON path can name it) names no call.
create or replace macro requested_tool_calls(attributes) as (
    list_concat(
        list_transform(
            list_filter(json_keys(attributes), lambda k: (k like 'llm.output_messages.%.tool_call.id'
                or k like 'gen_ai.completion.%.tool_calls.%.id') and not contains(k, '"')),
            lambda k: struct_pack(
                id := json_extract_string(attributes, '$."' || k || '"'),
                name := coalesce(
                    json_extract_string(attributes, '$."' || replace(k, 'tool_call.id', 'tool_call.function.name') || '"'),
                    json_extract_string(attributes, '$."' || regexp_replace(k, '\.id$', '.name') || '"')
                )
            )
        ),
        coalesce(list_transform(
            list_filter(
                cast(json_extract(json_text(json_extract_string(attributes, '$."gen_ai.output.messages"')), '$[*].parts[*]')
                    as json[]),
                lambda p: json_extract_string(p, '$.type') = 'tool_call'
            ),
            lambda p: struct_pack(id := json_extract_string(p, '$.id'), name := json_extract_string(p, '$.name'))
        ), [])
    )
);

-- framework_input_of(spans): the narrow columns the framework readings need, once per query: the attributes, status
-- message and exception events of spans without HLC only (a contract span says what it means itself).
create or replace macro framework_input_of(spans) as table
select
    session_id, turn_id, trace_id, span_id, parent_span_id, name, kind, status_code, layer, node, service_name,
    start_time_unix_nano, end_time_unix_nano, hlc,
    case when hlc is null then attributes end as attributes,
    case when hlc is null then status_message end as status_message,
    case when hlc is null then list_filter(events, lambda e: e.name = 'exception') else [] end as events
from query_table(spans);

-- inferred_steps_from(spans): rows in turn_events' shape (source `inferred`) for the cancellations, and the requests
-- for approval, a framework's spans show without declaring them, in turns whose spans carry no HLC (a contract turn
-- declares its own).
-- A cancel.requested row at the earliest signal, its cancel_origin saying which signal it is:
--   inferred.exception: a span ended with a cancellation exception (CancelledError, GeneratorExit) as an exception
--     event or its status message; at the first such exception.
--   inferred.error_finish_reason: a model call finished with finish reason error or cancelled; at its end.
--   inferred.no_finish_reason: the last model call of the turn ended without a finish reason (a stream cut short);
--     at its end.
--   inferred.span_never_ended: a span never ended although its parent did, or an agent run ended with nothing under
--     it (its model call never ended, so the SDK never exported it); at the parent's end.
--   inferred.tool_without_result: a tool span ended without its result (is_resultless_tool), and no model call of
--     the turn started after it (the model never saw a result); at the tool span's end. An OpenInference one shorter
--     than 10 ms is the OpenAI Agents SDK pausing the run for a tool that needs approval (its span ends at once,
--     without result, the tool not run): no stop, but an approval.requested row (below). A tool that returns
--     nothing in a run configured to stop at that tool (the SDK's stop_on_first_tool) reads as a stop.
-- And a cancel.acknowledged row at the end of each span that ended by the cancellation exception, and of each tool
-- span ended without its result (it stopped because of it), so cancel-to-ack is the time from the first
-- cancellation to the last span it stopped; without such a span nothing shows when the cancel was acknowledged,
-- and cancel_to_ack_ms is null (unknown).
-- And an approval.requested row for each call a run paused to ask approval for, naming it (inferred_call_id,
-- inferred_tool_name where the row's span does not), its turnlens.inferred saying how it shows:
--   'paused_tool': an OpenInference tool span shorter than 10 ms that ended without its result, with no model call
--     after it (the OpenAI Agents SDK); at its end.
--   'graph_interrupt': such a tool span, whatever its length, with LangGraph's GraphInterrupt exception (the tool
--     called interrupt() to ask before it acts); at its end.
--   'deferred_tool_requests': an agent run whose final_result lists the calls awaiting approval (pydantic-ai's
--     DeferredToolRequests, {"approvals": [{"tool_name", "tool_call_id"}, ...]}); at the run's end.
--   'tool_confirmation': an ADK tool span that ended without error in under 10 ms, its call answered, and no model
--     call of its turn after it: ADK's confirmation gate (a tool with require_confirmation) answered the call with a
--     request for confirmation instead of running it, and ended the run; at its end. The confirmed call runs in a
--     later turn, followed by a model call. (A tool under 10 ms that sets skip_summarization reads so too.)
create or replace macro inferred_steps_from(spans) as table
with input as materialized (  -- read once: every CTE below reads it again
    select * from framework_input_of(spans)
),

contract_turns as (
    select distinct turn_id from input where hlc is not null
),

framework_spans as (
    select
        s.session_id, s.turn_id, s.trace_id, s.span_id, s.parent_span_id, s.name, s.kind, s.status_code, s.layer,
        s.node, s.service_name, s.start_time_unix_nano, s.end_time_unix_nano,
        coalesce(
            list_min(list_transform(
                list_filter(s.events, lambda e: e.name = 'exception' and is_exception_of(e.attributes, cancellations())),
                -- never after the span's end: LangSmith stamps a run's error when it exports it, after the run ended
                lambda e: least(e.time_unix_nano, coalesce(s.end_time_unix_nano, e.time_unix_nano)))),
            case when s.status_code = 'error' and is_cancellation(s.status_message) then s.end_time_unix_nano end
        ) as cancel_exception_ns,
        is_model_span(s.attributes) as model_span,
        is_run_span(s.attributes) as run_span,
        is_resultless_tool(s.attributes, s.status_code) and s.end_time_unix_nano is not null as resultless_tool,
        is_openinference_tool(s.attributes) as openinference_tool,
        is_adk_answered_tool(s.attributes, s.status_code) and s.end_time_unix_nano is not null as adk_answered_tool,
        len(list_filter(s.events, lambda e: e.name = 'exception'
            and is_exception_of(e.attributes, graph_interrupts()))) > 0 as graph_interrupt,
        case when contains(s.attributes, '"approvals') and is_run_span(s.attributes) and s.end_time_unix_nano is not null
            then json_text(json_extract_string(s.attributes, '$.final_result')) end as final_result_json,
        case when is_model_span(s.attributes) then model_finish_reason(s.attributes) end as finish_reason
    from input as s
    anti join contract_turns as c using (turn_id)
),

childless_runs as (  -- an agent run that ended with nothing under it: its model call never ended
    select r.session_id, r.turn_id, r.span_id, r.layer, r.end_time_unix_nano as ns
    from framework_spans as r
    anti join framework_spans as c on c.trace_id = r.trace_id and c.parent_span_id = r.span_id
    where r.run_span and r.end_time_unix_nano is not null
),

orphans as (  -- a span that never ended under a parent that did
    select c.session_id, c.turn_id, p.span_id, p.layer, p.end_time_unix_nano as ns
    from framework_spans as c
    join framework_spans as p on p.trace_id = c.trace_id and p.span_id = c.parent_span_id
    where c.end_time_unix_nano is null and p.end_time_unix_nano is not null
),

unanswered_tools as (  -- a tool span ended without its result, and no model call of its turn came after; or
    -- ADK's confirmation gate answering a call in its place (below 10 ms, no model call after)
    select
        t.session_id, t.turn_id, t.span_id, t.layer, t.end_time_unix_nano as ns,
        case
            when t.graph_interrupt then 'graph_interrupt'
            when not t.resultless_tool then 'tool_confirmation'
            -- 10 ms: the OpenAI Agents SDK (OpenInference) asked for approval; ADK's and Traceloop's spans have no
            -- such pause, and theirs are stops whatever their length
            when t.openinference_tool and t.end_time_unix_nano - t.start_time_unix_nano < 10000000 then 'paused_tool'
        end as paused
    from framework_spans as t
    anti join framework_spans as m
        on m.session_id = t.session_id and m.turn_id = t.turn_id and m.model_span
        and m.start_time_unix_nano >= t.end_time_unix_nano
    where t.resultless_tool
        or (t.adk_answered_tool and t.end_time_unix_nano - t.start_time_unix_nano < 10000000)
),

tools_without_result as (  -- stopped while they ran
    select session_id, turn_id, span_id, layer, ns from unanswered_tools where paused is null
),

last_model as (
    select
        session_id, turn_id,
        arg_max(struct_pack(span_id := span_id, layer := layer, ns := end_time_unix_nano, reason := finish_reason),
            row(start_time_unix_nano, trace_id, span_id)) as call
    from framework_spans
    where model_span and end_time_unix_nano is not null
    group by session_id, turn_id
),

signals as (
    select session_id, turn_id, span_id, layer, cancel_exception_ns as ns, 'inferred.exception' as origin, 1 as rank
    from framework_spans where cancel_exception_ns is not null
    union all
    select session_id, turn_id, span_id, layer, end_time_unix_nano, 'inferred.error_finish_reason', 2
    from framework_spans where model_span and finish_reason in ('error', 'cancelled') and end_time_unix_nano is not null
    union all
    select session_id, turn_id, call.span_id, call.layer, call.ns, 'inferred.no_finish_reason', 3
    from last_model where call.reason is null
    union all
    select session_id, turn_id, span_id, layer, ns, 'inferred.span_never_ended', 4 from orphans
    union all
    select session_id, turn_id, span_id, layer, ns, 'inferred.span_never_ended', 4 from childless_runs
    union all
    select session_id, turn_id, span_id, layer, ns, 'inferred.tool_without_result', 5 from tools_without_result
),

first_signal as (
    select session_id, turn_id, arg_min(struct_pack(span_id := span_id, layer := layer, ns := ns, origin := origin),
        struct_pack(ns := ns, rank := rank, span_id := span_id, origin := origin)) as first
    from signals
    group by session_id, turn_id
),

requested as (
    select f.session_id, f.turn_id, f.first.span_id as span_id, f.first.layer as layer, f.first.ns as wall_ns,
        'cancel.requested' as step, f.first.origin as cancel_origin
    from first_signal as f
),

acknowledged as (
    select s.session_id, s.turn_id, s.span_id, s.layer, s.end_time_unix_nano as wall_ns,
        'cancel.acknowledged' as step, r.cancel_origin
    from framework_spans as s
    join requested as r using (session_id, turn_id)
    left join tools_without_result as t
        on t.session_id = s.session_id and t.turn_id = s.turn_id and t.span_id = s.span_id
    where (s.cancel_exception_ns is not null or t.span_id is not null) and s.end_time_unix_nano >= r.wall_ns
),

approvals_requested as (
    select session_id, turn_id, span_id, layer, ns as wall_ns, 'approval.requested' as step,
        null::varchar as cancel_origin, paused as how, null::varchar as call_id, null::varchar as tool
    from unanswered_tools where paused is not null
    union all
    select session_id, turn_id, span_id, layer, end_time_unix_nano, 'approval.requested', null,
        'deferred_tool_requests', json_extract_string(a, '$.tool_call_id'), json_extract_string(a, '$.tool_name')
    from (
        select *, unnest(cast(json_extract(final_result_json, '$.approvals[*]') as json[])) as a
        from framework_spans
        where final_result_json is not null
    )
    where json_extract_string(a, '$.tool_call_id') is not null
),

cancel_steps as (
    select *, null::varchar as how, null::varchar as call_id, null::varchar as tool from requested
    union all
    select *, null, null, null from acknowledged
)

select
    x.session_id, x.turn_id, s.trace_id, x.span_id, s.parent_span_id,
    'inferred' as source, null::bigint as event_index, x.step as name, x.step, x.layer, s.node, s.service_name,
    s.name as span_name, s.kind as span_kind, s.status_code, x.wall_ns, null::bigint as hlc,
    'wall_clock' as hlc_source, (x.wall_ns // 1000000) << 16 as order_hlc, x.wall_ns // 1000000 as hlc_ms,
    null::double as skew_ms, x.cancel_origin,
    case when x.how is not null then json_object('turnlens.inferred', x.how)
        else json_object('turnlens.cancel.origin', x.cancel_origin) end as attributes,
    x.call_id as inferred_call_id, x.tool as inferred_tool_name
from (select * from cancel_steps union all select * from approvals_requested) as x
join framework_spans as s using (turn_id, span_id);

-- turnlens_hlc(value): a carried turnlens.hlc, or null when it cannot be one: negative, or a physical part past
-- 9,223,372,036,854 ms (April 2262, where int64 Unix nanoseconds end; its skew against a wall clock would not fit
-- in them). The rows of such a span or event are ordered as if they carried none; the store keeps the value.
create or replace macro turnlens_hlc(value) as (
    case when value between 0 and 604462909807329279 then value end  -- (9223372036854 << 16) | 0xffff
);

-- span_clock_hlc(span_hlc, wall_ns, start_ns): the HLC of a row without one of its own, in a span with one: the
-- span's moved on by the wall time elapsed since the span started; 0 for a row stamped before the span's HLC
-- could have been (a row far earlier than its span's start: a clock, or an SDK, that left its time unset).
create or replace macro span_clock_hlc(span_hlc, wall_ns, start_ns) as (
    -- greatest() skips nulls: without the case, a span without an HLC would give its rows HLC 0
    case when span_hlc is not null then greatest((span_hlc >> 16) + (wall_ns - start_ns) // 1000000, 0) << 16 end
);

-- turn_events_from(spans): the same rows over a relation with the spans view's columns, named by string
-- (turn_events_in passes a list's traces; the materialised views' fresh part passes its own, derived/fresh.sql).
create or replace macro turn_events_from(spans) as table
with contract_steps(step) as (  -- the span contract's event names (kernel/contract.py EVENT_NAMES)
    values
        ('turn.user_input'), ('stream.progress'), ('stream.completed'), ('cancel.requested'),
        ('cancel.received'), ('cancel.acknowledged'), ('tool.buffered'), ('tool.dispatched'),
        ('tool.prepared'), ('tool.committed'), ('tool.compensated'), ('tool.compensation_failed'),
        ('tool.discarded'), ('tool.failed'), ('partial.stored'), ('third_party.ack'),
        ('approval.requested'), ('approval.granted'), ('approval.denied'), ('billing.charged'),
        ('transcript.receipt')
),

typed_spans as not materialized (  -- what a span's events inherit from it (tool identity), as scalar columns: a
    -- list of 18 copied onto each of its rows by the unnest cost more than parsing the attributes of the span's start
    -- and end again. Not materialised: its three readers each read the spans again. A copy of every span with its
    -- attributes and events, read three times, cost more: 6.3 against 5.0 CPU s to count the 2.97M rows of
    -- 250,000 spans
    select
        * exclude (inherited),
        tool_call_id_of(inherited[1]) as inherited_call_id,
        inherited[2] as inherited_tool_name,
        inherited[3] as inherited_oi_tool_name,
        inherited[4] as inherited_idempotency_key,
        inherited[5] as inherited_tier,
        inherited[6] as inherited_dispatch,
        inherited[7] as inherited_billable,
        inherited[8] as inherited_requires_approval,
        inherited[9] as inherited_cancel_origin,
        inherited[10] as inherited_oi_call_id
    from (
        select
            session_id, turn_id, trace_id, span_id, parent_span_id, name as span_name, kind as span_kind,
            status_code, layer, node, service_name, turnlens_hlc(hlc) as span_hlc, start_time_unix_nano, end_time_unix_nano,
            attributes as span_attributes, events,
            json_extract_string(attributes, [
                '$."gen_ai.tool.call.id"', '$."gen_ai.tool.name"', '$."tool.name"', '$."turnlens.idempotency_key"',
                '$."turnlens.tool.tier"', '$."turnlens.tool.dispatch"', '$."turnlens.tool.billable"',
                '$."turnlens.tool.requires_approval"', '$."turnlens.cancel.origin"', '$."tool_call.id"'
            ]) as inherited,
            hlc is null and is_model_span(attributes) as model_span  -- a framework's (a contract span has HLC)
        from query_table(spans)
    )
),

exploded as (  -- every row a span gives, each with its own attributes: its start and its end (a span that never
    -- ended has no end row: its turn is open) with the span's, each event with the event's. Three reads of the
    -- spans and an unnest of the events as they are: building a list of a span's rows to unnest took eight times
    -- as long (0.19 s against 0.02 s for 100,000 spans, 1.2M rows: a stream span carries dozens of progress events)
    select
        * exclude (events, span_attributes),
        'span_start' as source, 0::bigint as event_index, span_name as name, start_time_unix_nano as wall_ns,
        span_hlc as own_hlc, span_attributes as own_attributes
    from typed_spans
    union all
    select
        * exclude (events, span_attributes),
        'span_end', null, span_name, end_time_unix_nano, null, span_attributes
    from typed_spans
    where end_time_unix_nano is not null
    union all
    select
        * exclude (events, span_attributes, event, event_index),
        'event', event_index, event.name, event.time_unix_nano, turnlens_hlc(event.hlc), event.attributes
    from (select *, unnest(events) as event, generate_subscripts(events, 1)::bigint as event_index from typed_spans)
),

all_rows as (  -- each row's own attributes parsed once, into a struct of the keys read below (json_transform:
    -- a key's value as json_extract_string gives it; null when absent). A list of 26 paths cost 1.8 s against 1.0 s
    -- for the 2.97M rows of 250,000 spans, most of them stream progress events
    select
        * exclude (own_attributes),
        json_transform(own_attributes, '{
            "gen_ai.tool.call.id": "VARCHAR", "gen_ai.tool.name": "VARCHAR", "tool.name": "VARCHAR",
            "turnlens.idempotency_key": "VARCHAR", "turnlens.tool.tier": "VARCHAR", "turnlens.tool.dispatch": "VARCHAR",
            "turnlens.tool.billable": "VARCHAR", "turnlens.tool.requires_approval": "VARCHAR",
            "turnlens.cancel.origin": "VARCHAR", "gen_ai.response.finish_reasons": "VARCHAR",
            "turnlens.stream.tokens": "VARCHAR", "turnlens.third_party.status": "VARCHAR",
            "turnlens.third_party.replayed": "VARCHAR", "turnlens.billing.kind": "VARCHAR",
            "turnlens.billing.amount": "VARCHAR", "turnlens.billing.tokens": "VARCHAR", "turnlens.input.kind": "VARCHAR",
            "gen_ai.usage.input_tokens": "VARCHAR", "llm.token_count.prompt": "VARCHAR",
            "gen_ai.usage.prompt_tokens": "VARCHAR", "gen_ai.usage.output_tokens": "VARCHAR",
            "llm.token_count.completion": "VARCHAR", "gen_ai.usage.completion_tokens": "VARCHAR",
            "operation.cost": "VARCHAR", "llm.cost.total": "VARCHAR"
        }') as own,
        own_attributes as attributes,
        case
            when source = 'event' and not (name = 'exception' or name ilike '%chunk%'
                or starts_with(name, 'gen_ai.')) then name
            -- a lifecycle step emitted as its own span (the contract's event names, kernel/contract.py)
            when source = 'span_start' and name in (select step from contract_steps) then name
        end as step
    from exploded
),

clocked as (  -- the order key: the carried HLC, else the span's HLC moved on by wall time, else wall time
    select
        *,
        case
            when own_hlc is not null then 'hlc'
            when span_hlc is not null then 'span_clock'
            else 'wall_clock'
        end as hlc_source,
        coalesce(
            own_hlc,
            span_clock_hlc(span_hlc, wall_ns, start_time_unix_nano),
            (wall_ns // 1000000) << 16
        ) as order_hlc,
        coalesce(tool_call_id_of(own."gen_ai.tool.call.id"), inherited_call_id, inherited_oi_call_id) as named_call_id,
        coalesce(own."gen_ai.tool.name", own."tool.name", inherited_tool_name, inherited_oi_tool_name) as any_tool_name
    from all_rows
),

framework_input as materialized (  -- what the framework readings below need, read once
    select * from framework_input_of(spans)
),

requested_calls as (  -- the tool calls the models of a turn asked for, the n-th request of each tool numbered n
    select
        turn_id, call.name as tool_name, call.id as call_id,
        row_number() over (
            partition by turn_id, call.name order by start_time_unix_nano, trace_id, span_id, position
        ) as nth
    from (
        select
            turn_id, start_time_unix_nano, trace_id, span_id, unnest(calls) as call,
            generate_subscripts(calls, 1) as position
        from (
            select turn_id, start_time_unix_nano, trace_id, span_id, requested_tool_calls(attributes) as calls
            from framework_input
            where contains(attributes, 'tool_call') and is_model_span(attributes)
        )
    )
    where call.id is not null
),

unnamed_tool_spans as (  -- tool spans that name no call (OpenInference, Traceloop), the n-th run of each tool numbered n
    select
        trace_id, span_id, turn_id, tool_name,
        row_number() over (partition by turn_id, tool_name order by start_time_unix_nano, span_id, trace_id) as nth
    from (
        select
            trace_id, span_id, turn_id, start_time_unix_nano,
            coalesce(json_extract_string(attributes, '$."gen_ai.tool.name"'), json_extract_string(attributes, '$."tool.name"'))
                as tool_name
        from framework_input
        where layer = 'tool' and not contains(attributes, 'call.id"')
    )
    where tool_name is not null
),

joined_calls as (  -- each such span under the id of the call the model requested
    select u.trace_id, u.span_id, r.call_id
    from unnamed_tool_spans as u
    join requested_calls as r using (turn_id, tool_name, nth)
),

contract_rows as (
    select c.*, j.call_id as requested_call_id
    from clocked as c
    left join joined_calls as j using (trace_id, span_id)
)

select
    session_id,
    turn_id,
    trace_id,
    span_id,
    parent_span_id,
    source,
    event_index,
    name,
    step,
    layer,
    node,
    service_name,
    span_name,
    span_kind,
    status_code,
    wall_ns,
    own_hlc as hlc,
    hlc_source,
    order_hlc,
    order_hlc >> 16 as hlc_ms,
    ((own_hlc >> 16) * 1000000 - wall_ns) / 1e6 as skew_ms,
    tool_call_of(named_call_id, any_tool_name, layer, requested_call_id, span_id) as tool_call_id,
    case when not is_tool_batch(any_tool_name) then any_tool_name end as tool_name,
    coalesce(own."turnlens.idempotency_key", inherited_idempotency_key) as idempotency_key,
    coalesce(own."turnlens.tool.tier", inherited_tier) as tier,
    coalesce(own."turnlens.tool.dispatch", inherited_dispatch) as dispatch,
    try_cast(coalesce(own."turnlens.tool.billable", inherited_billable) as boolean) as billable,
    try_cast(coalesce(own."turnlens.tool.requires_approval", inherited_requires_approval) as boolean) as requires_approval,
    coalesce(own."turnlens.cancel.origin", inherited_cancel_origin) as cancel_origin,
    coalesce(
        case when starts_with(own."gen_ai.response.finish_reasons", '[')  -- a list, or Logfire's JSON text of one
            then json_extract_string(json_text(own."gen_ai.response.finish_reasons"), '$[0]')
            else own."gen_ai.response.finish_reasons" end,
        case when model_span and source <> 'event' then model_finish_reason(attributes) end
    ) as finish_reason,
    try_cast(own."turnlens.stream.tokens" as bigint) as stream_tokens,
    own."turnlens.third_party.status" as third_party_status,
    try_cast(own."turnlens.third_party.replayed" as boolean) as replayed,
    own."turnlens.billing.kind" as billing_kind,
    try_cast(own."turnlens.billing.amount" as double) as billing_amount,
    try_cast(own."turnlens.billing.tokens" as bigint) as billing_tokens,
    own."turnlens.input.kind" as input_kind,
    attributes,
    case when model_span and source = 'span_start' then try_cast(coalesce(
        own."gen_ai.usage.input_tokens", own."llm.token_count.prompt", own."gen_ai.usage.prompt_tokens"
    ) as bigint) end as input_tokens,
    case when model_span and source = 'span_start' then try_cast(coalesce(
        own."gen_ai.usage.output_tokens", own."llm.token_count.completion", own."gen_ai.usage.completion_tokens"
    ) as bigint) end as output_tokens,
    case when model_span and source = 'span_start' then try_cast(coalesce(own."operation.cost", own."llm.cost.total")
        as double) end as reported_cost,
    model_span and source = 'span_start' as model_call
from contract_rows
union all by name
select  -- an inferred row names its call: the one it carries (a run's list of calls awaiting approval), else, on a
    -- tool span (a tool the cancellation stopped, or paused), the span's
    i.* exclude (inferred_call_id, inferred_tool_name),
    coalesce(i.inferred_call_id, tool_call_of(f.call_id, f.tool_name, i.layer, j.call_id, i.span_id)) as tool_call_id,
    coalesce(i.inferred_tool_name, case when not is_tool_batch(f.tool_name) then f.tool_name end) as tool_name
from inferred_steps_from('framework_input') as i
left join (
    select
        trace_id, span_id,
        coalesce(tool_call_id_of(json_extract_string(attributes, '$."gen_ai.tool.call.id"')),
            json_extract_string(attributes, '$."tool_call.id"')) as call_id,
        coalesce(json_extract_string(attributes, '$."gen_ai.tool.name"'), json_extract_string(attributes, '$."tool.name"'))
            as tool_name
    from framework_input
    where layer = 'tool'
) as f using (trace_id, span_id)
left join joined_calls as j using (trace_id, span_id);

-- turn_events_in(traces): the same rows for the traces of a list only (null: every trace); see spans_in.
create or replace macro turn_events_in(traces) as table
with resolved_spans as (select * from spans_in(traces))
select * from turn_events_from('resolved_spans');

create or replace view turn_events as
select * from turn_events_in(null);
