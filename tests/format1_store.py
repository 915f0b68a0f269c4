# ruff: noqa: E501 (rows as that helikon wrote them: long JSON kept whole)
"""A run store as helikon wrote it in format 1 (every row signed alone), before runs were
chained: SQLite schema 3, PostgreSQL schema 1. Written by helikon at commit bd221bc with
`store_support.KEY`: run "r1" suspended at the transfer's approval, run "r2" the same run
approved and completed (its transfer ran once), session "s" three items added by two runs.
`TABLES[name]` is (columns, rows) of each table, as that helikon read them back; the
SQLite store's `run_key` and records' `id` are left out (the loader makes them).
"""

from __future__ import annotations

from typing import Any

from store_support import Backend, PostgresBackend

from helikon.durable import postgres_sql, sqlite_sql

TABLES: dict[str, tuple[tuple[str, ...], list[tuple[Any, ...]]]] = {
    "calls": (
        ("run_id", "seq", "call_id", "tool", "arguments_hash", "result", "mac"),
        [
            (
                "r2",
                3,
                "t1",
                "transfer",
                "9f833feb19675f77564799eba4842f5c8b7987e0173721000ba9420971012f29",
                '{"call_id":"t1","content":"sent 10 to '
                'ann","is_error":false,"status":"executed","type":"tool_result"}',
                "f126f0df70d44cfa4971bfed173c8ed0f8beed056a9f138c5e919f1207e8240e",
            )
        ],
    ),
    "charts": (
        ("digest", "data"),
        [
            (
                "a15a890f46b8db54dcc30c6ee1ef999b0043416dd10967089e9a5b426babbb53",
                '{"name":"AgentLoopChart","initial":"CallingModel","phases":[{"name":"CallingModel","final":false,"custom":false},{"name":"ExecutingTools","final":false,"custom":false},{"name":"NeedsApproval","final":false,"custom":false},{"name":"ApplyingHandoff","final":false,"custom":false},{"name":"Finalizing","final":false,"custom":false},{"name":"RepairingOutput","final":false,"custom":false},{"name":"Compacting","final":false,"custom":false},{"name":"Done","final":true,"custom":false},{"name":"Failed","final":true,"custom":false}],"rows":[{"index":0,"source":"CallingModel","input_kind":"start","guards":[{"name":"budget_exhausted","expected":true}],"target":"Failed","action":"fail_budget","implicit":false},{"index":1,"source":"CallingModel","input_kind":"start","guards":[{"name":"output_only","expected":true}],"target":"Finalizing","action":"start_turn","implicit":false},{"index":2,"source":"CallingModel","input_kind":"start","guards":[],"target":"CallingModel","action":"start_turn","implicit":false},{"index":3,"source":"CallingModel","input_kind":"model_response","guards":[{"name":"truncated","expected":true}],"target":"Failed","action":"fail_truncated","implicit":false},{"index":4,"source":"CallingModel","input_kind":"model_response","guards":[{"name":"empty","expected":true}],"target":"Failed","action":"fail_empty","implicit":false},{"index":5,"source":"CallingModel","input_kind":"model_response","guards":[{"name":"duplicate_call_ids","expected":true}],"target":"Failed","action":"fail_duplicate_calls","implicit":false},{"index":6,"source":"CallingModel","input_kind":"model_response","guards":[{"name":"has_handoff","expected":true}],"target":"ApplyingHandoff","action":"apply_handoff","implicit":false},{"index":7,"source":"CallingModel","input_kind":"model_response","guards":[{"name":"needs_approval","expected":true}],"target":"NeedsApproval","action":"request_approval","implicit":false},{"index":8,"source":"CallingModel","input_kind":"model_response","guards":[{"name":"has_tool_calls","expected":true}],"target":"ExecutingTools","action":"execute_tools","implicit":false},{"index":9,"source":"CallingModel","input_kind":"model_response","guards":[{"name":"has_output_type","expected":true}],"target":"Finalizing","action":"finalize","implicit":false},{"index":10,"source":"CallingModel","input_kind":"model_response","guards":[],"target":"Done","action":"complete","implicit":false},{"index":11,"source":"CallingModel","input_kind":"cancel","guards":[],"target":"Failed","action":"cancel_run","implicit":false},{"index":12,"source":"CallingModel","input_kind":"fail","guards":[],"target":"Failed","action":"fail_run","implicit":false},{"index":13,"source":"ExecutingTools","input_kind":"tool_results","guards":[{"name":"turn_limit_reached","expected":true}],"target":"Failed","action":"fail_max_turns","implicit":false},{"index":14,"source":"ExecutingTools","input_kind":"tool_results","guards":[{"name":"over_context_budget","expected":true}],"target":"Compacting","action":"compact","implicit":false},{"index":15,"source":"ExecutingTools","input_kind":"tool_results","guards":[{"name":"budget_exhausted","expected":true}],"target":"Failed","action":"fail_budget","implicit":false},{"index":16,"source":"ExecutingTools","input_kind":"tool_results","guards":[],"target":"CallingModel","action":"next_turn","implicit":false},{"index":17,"source":"ExecutingTools","input_kind":"cancel","guards":[],"target":"Failed","action":"cancel_run","implicit":false},{"index":18,"source":"ExecutingTools","input_kind":"fail","guards":[],"target":"Failed","action":"fail_run","implicit":false},{"index":19,"source":"NeedsApproval","input_kind":"approval_decisions","guards":[{"name":"all_decided","expected":true}],"target":"ExecutingTools","action":"run_approved","implicit":false},{"index":20,"source":"NeedsApproval","input_kind":"approval_decisions","guards":[],"target":"NeedsApproval","action":"record_decisions","implicit":false},{"index":21,"source":"NeedsApproval","input_kind":"cancel","guards":[],"target":"Failed","action":"cancel_run","implicit":false},{"index":22,"source":"NeedsApproval","input_kind":"fail","guards":[],"target":"Failed","action":"fail_run","implicit":false},{"index":23,"source":"ApplyingHandoff","input_kind":"handoff_result","guards":[{"name":"succeeded","expected":true}],"target":"Done","action":"complete_handoff","implicit":false},{"index":24,"source":"ApplyingHandoff","input_kind":"handoff_result","guards":[],"target":"Failed","action":"fail_handoff","implicit":false},{"index":25,"source":"ApplyingHandoff","input_kind":"cancel","guards":[],"target":"Failed","action":"cancel_run","implicit":false},{"index":26,"source":"ApplyingHandoff","input_kind":"fail","guards":[],"target":"Failed","action":"fail_run","implicit":false},{"index":27,"source":"Finalizing","input_kind":"model_response","guards":[{"name":"output_valid","expected":true}],"target":"Done","action":"complete_structured","implicit":false},{"index":28,"source":"Finalizing","input_kind":"model_response","guards":[],"target":"RepairingOutput","action":"repair","implicit":false},{"index":29,"source":"Finalizing","input_kind":"cancel","guards":[],"target":"Failed","action":"cancel_run","implicit":false},{"index":30,"source":"Finalizing","input_kind":"fail","guards":[],"target":"Failed","action":"fail_run","implicit":false},{"index":31,"source":"RepairingOutput","input_kind":"model_response","guards":[{"name":"output_valid","expected":true}],"target":"Done","action":"complete_structured","implicit":false},{"index":32,"source":"RepairingOutput","input_kind":"model_response","guards":[],"target":"Failed","action":"fail_structured","implicit":false},{"index":33,"source":"RepairingOutput","input_kind":"cancel","guards":[],"target":"Failed","action":"cancel_run","implicit":false},{"index":34,"source":"RepairingOutput","input_kind":"fail","guards":[],"target":"Failed","action":"fail_run","implicit":false},{"index":35,"source":"Compacting","input_kind":"model_response","guards":[],"target":"CallingModel","action":"apply_summary","implicit":false},{"index":36,"source":"Compacting","input_kind":"cancel","guards":[],"target":"Failed","action":"cancel_run","implicit":false},{"index":37,"source":"Compacting","input_kind":"fail","guards":[],"target":"Failed","action":"fail_run","implicit":false},{"index":38,"source":"CallingModel","input_kind":"tool_results","guards":[],"target":"Failed","action":"reject_input","implicit":true},{"index":39,"source":"CallingModel","input_kind":"approval_decisions","guards":[],"target":"Failed","action":"reject_input","implicit":true},{"index":40,"source":"CallingModel","input_kind":"handoff_result","guards":[],"target":"Failed","action":"reject_input","implicit":true},{"index":41,"source":"ExecutingTools","input_kind":"start","guards":[],"target":"Failed","action":"reject_input","implicit":true},{"index":42,"source":"ExecutingTools","input_kind":"model_response","guards":[],"target":"Failed","action":"reject_input","implicit":true},{"index":43,"source":"ExecutingTools","input_kind":"approval_decisions","guards":[],"target":"Failed","action":"reject_input","implicit":true},{"index":44,"source":"ExecutingTools","input_kind":"handoff_result","guards":[],"target":"Failed","action":"reject_input","implicit":true},{"index":45,"source":"NeedsApproval","input_kind":"start","guards":[],"target":"Failed","action":"reject_input","implicit":true},{"index":46,"source":"NeedsApproval","input_kind":"model_response","guards":[],"target":"Failed","action":"reject_input","implicit":true},{"index":47,"source":"NeedsApproval","input_kind":"tool_results","guards":[],"target":"Failed","action":"reject_input","implicit":true},{"index":48,"source":"NeedsApproval","input_kind":"handoff_result","guards":[],"target":"Failed","action":"reject_input","implicit":true},{"index":49,"source":"ApplyingHandoff","input_kind":"start","guards":[],"target":"Failed","action":"reject_input","implicit":true},{"index":50,"source":"ApplyingHandoff","input_kind":"model_response","guards":[],"target":"Failed","action":"reject_input","implicit":true},{"index":51,"source":"ApplyingHandoff","input_kind":"tool_results","guards":[],"target":"Failed","action":"reject_input","implicit":true},{"index":52,"source":"ApplyingHandoff","input_kind":"approval_decisions","guards":[],"target":"Failed","action":"reject_input","implicit":true},{"index":53,"source":"Finalizing","input_kind":"start","guards":[],"target":"Failed","action":"reject_input","implicit":true},{"index":54,"source":"Finalizing","input_kind":"tool_results","guards":[],"target":"Failed","action":"reject_input","implicit":true},{"index":55,"source":"Finalizing","input_kind":"approval_decisions","guards":[],"target":"Failed","action":"reject_input","implicit":true},{"index":56,"source":"Finalizing","input_kind":"handoff_result","guards":[],"target":"Failed","action":"reject_input","implicit":true},{"index":57,"source":"RepairingOutput","input_kind":"start","guards":[],"target":"Failed","action":"reject_input","implicit":true},{"index":58,"source":"RepairingOutput","input_kind":"tool_results","guards":[],"target":"Failed","action":"reject_input","implicit":true},{"index":59,"source":"RepairingOutput","input_kind":"approval_decisions","guards":[],"target":"Failed","action":"reject_input","implicit":true},{"index":60,"source":"RepairingOutput","input_kind":"handoff_result","guards":[],"target":"Failed","action":"reject_input","implicit":true},{"index":61,"source":"Compacting","input_kind":"start","guards":[],"target":"Failed","action":"reject_input","implicit":true},{"index":62,"source":"Compacting","input_kind":"tool_results","guards":[],"target":"Failed","action":"reject_input","implicit":true},{"index":63,"source":"Compacting","input_kind":"approval_decisions","guards":[],"target":"Failed","action":"reject_input","implicit":true},{"index":64,"source":"Compacting","input_kind":"handoff_result","guards":[],"target":"Failed","action":"reject_input","implicit":true},{"index":65,"source":"Done","input_kind":"start","guards":[],"target":"Done","action":"absorb","implicit":true},{"index":66,"source":"Done","input_kind":"model_response","guards":[],"target":"Done","action":"absorb","implicit":true},{"index":67,"source":"Done","input_kind":"tool_results","guards":[],"target":"Done","action":"absorb","implicit":true},{"index":68,"source":"Done","input_kind":"approval_decisions","guards":[],"target":"Done","action":"absorb","implicit":true},{"index":69,"source":"Done","input_kind":"handoff_result","guards":[],"target":"Done","action":"absorb","implicit":true},{"index":70,"source":"Done","input_kind":"cancel","guards":[],"target":"Done","action":"absorb","implicit":true},{"index":71,"source":"Done","input_kind":"fail","guards":[],"target":"Done","action":"absorb","implicit":true},{"index":72,"source":"Failed","input_kind":"start","guards":[],"target":"Failed","action":"absorb","implicit":true},{"index":73,"source":"Failed","input_kind":"model_response","guards":[],"target":"Failed","action":"absorb","implicit":true},{"index":74,"source":"Failed","input_kind":"tool_results","guards":[],"target":"Failed","action":"absorb","implicit":true},{"index":75,"source":"Failed","input_kind":"approval_decisions","guards":[],"target":"Failed","action":"absorb","implicit":true},{"index":76,"source":"Failed","input_kind":"handoff_result","guards":[],"target":"Failed","action":"absorb","implicit":true},{"index":77,"source":"Failed","input_kind":"cancel","guards":[],"target":"Failed","action":"absorb","implicit":true},{"index":78,"source":"Failed","input_kind":"fail","guards":[],"target":"Failed","action":"absorb","implicit":true}],"guard_docs":{"all_decided":"Every '
                "pending call has a binding decision (call_id and argument hash "
                'match).","budget_exhausted":"The run\'s token budget is spent (usage.total_tokens '
                '>= token_budget).","duplicate_call_ids":"Two tool calls of the response share a '
                'call id (each call needs its own result).","empty":"The response has no text and no '
                'tool calls.","has_handoff":"Some tool call is a handoff (`transfer_to_<agent>`) the '
                'run\'s policy does not deny.","has_output_type":"The agent has an output type, so '
                'its answer needs a constrained finalizing turn.","has_tool_calls":"The response '
                'asks for at least one tool call.","needs_approval":"Some tool call\'s permission '
                '(tool policy, run policy) says ask.","output_only":"An output type is set and the '
                'agent has no tools and no handoffs.","output_valid":"The response\'s text validates '
                'against the output type.","over_context_budget":"The context, with these tool '
                'results, reaches the compaction threshold.","succeeded":"The handoff target\'s run '
                'completed.","truncated":"The model hit its length limit (finish_reason=length) with '
                'no complete tool call.","turn_limit_reached":"The tool loop has used all its model '
                'calls (turn + 1 >= max_turns)."},"action_docs":{"absorb":"A terminal phase absorbs '
                'every input: same state, no events, Terminate.","apply_handoff":"Hand control to '
                "the first handoff call's agent; every other call is "
                'skipped.","apply_summary":"Append the summary (older items stay in the log) and '
                "open the next turn.\\n\\nAn empty summary is not appended: it would hide the whole "
                "conversation from the model,\\nso the model keeps seeing it in full "
                'instead.","cancel_run":"Fail with Cancelled, counting its usage; unfinished tool '
                'calls get a \\"cancelled\\" result.","compact":"Keep the results, then ask the '
                'model to summarise the conversation.","complete":"Finish with the response\'s '
                'text.","complete_handoff":"The target finished: so does this run, with its output '
                'and both agents\' usage.","complete_structured":"Finish with the validated '
                'value.","execute_tools":"Run the batch; calls the policy denies get a denial result '
                'instead.","fail_budget":"Fail with BudgetExceeded, keeping any tool results that '
                'just arrived.","fail_duplicate_calls":"Fail with ModelCallFailed (bad_response), '
                "naming the call id used twice: a result\\ncould not say which call it answers, nor "
                'an approval which call it binds.","fail_empty":"Fail with '
                'EmptyModelResponse.","fail_handoff":"The target failed: so does this run, with the '
                'target\'s error.","fail_max_turns":"The turn limit is reached: keep the last tool '
                'outputs, then fail.","fail_run":"Fail with the driver\'s error, counting what it '
                "carries (finished sub-agents, the\\nfailed model call); unfinished tool calls get a "
                '\\"cancelled\\" result.","fail_structured":"The repair failed too: fail with '
                'InvalidStructuredOutput.","fail_truncated":"Fail with ModelOutputTruncated, keeping '
                'whatever text arrived.","finalize":"Keep the answer and open the constrained turn '
                'that asks for the output type.","next_turn":"Keep the results and open the next '
                'turn.","record_decisions":"Some calls are still undecided: keep waiting on them, '
                'remember the rest.","reject_input":"An input this phase never waits for: fail '
                'closed with UnexpectedInput.","repair":"The output failed validation: ask once '
                'more, quoting the errors.","request_approval":"Wait for decisions on the calls that '
                'ask; the rest of the batch waits with them.","run_approved":"All decided: run the '
                "allowed and approved calls; rejected ones get a denial "
                'result.","start_turn":"Append the user\'s input and open turn `state.turn` in phase '
                '`target`."},"prompts":{},"effects":{}}',
            )
        ],
    ),
    "decisions": (
        ("run_id", "seq", "call_id", "data", "mac"),
        [
            (
                "r2",
                2,
                "t1",
                '{"call_id":"t1","arguments_hash":"9f833feb19675f77564799eba4842f5c8b7987e0173721000ba9420971012f29","approved":true,"reason":"","run_id":"r2","seq":2}',
                "4e5b06c75628a9c887142a2f663a84c334c2abdfb4ee45156c3865d8f1b95976",
            )
        ],
    ),
    "effects": (
        ("run_id", "n", "after_seq", "data", "mac"),
        [
            (
                "r1",
                1,
                0,
                '{"after_seq":0,"event":{"agent":"teller","run_id":"r1","type":"run_started"}}',
                "3a158bb3bf9d3f71881612b3260ca9569bbbff54a90cf04ba80d209e70fc4d36",
            ),
            (
                "r1",
                2,
                2,
                '{"after_seq":2,"event":{"pending":[{"call":{"call_id":"t1","name":"transfer","arguments":"{\\"to\\": '
                '\\"ann\\", \\"amount\\": '
                '10}","type":"tool_call"},"arguments_hash":"9f833feb19675f77564799eba4842f5c8b7987e0173721000ba9420971012f29","run_id":"r1","seq":2}],"type":"run_suspended"}}',
                "ee4ae40724cd107f7c197f7c9d710465ec60bedef94b2e985e662d7222aa2548",
            ),
            (
                "r2",
                1,
                0,
                '{"after_seq":0,"event":{"agent":"teller","run_id":"r2","type":"run_started"}}',
                "9877b5c2ab29fb4b11e17eba93f0cb314e1419d0fb6f13e10798db3cbb0cb95f",
            ),
            (
                "r2",
                2,
                2,
                '{"after_seq":2,"event":{"pending":[{"call":{"call_id":"t1","name":"transfer","arguments":"{\\"to\\": '
                '\\"ann\\", \\"amount\\": '
                '10}","type":"tool_call"},"arguments_hash":"9f833feb19675f77564799eba4842f5c8b7987e0173721000ba9420971012f29","run_id":"r2","seq":2}],"type":"run_suspended"}}',
                "0048714e4197a4922770ed2f76d06e4fe0abc8d64eac2d54f226a2e23ae43016",
            ),
        ],
    ),
    "records": (
        ("run_id", "seq", "data", "mac"),
        [
            (
                "r1",
                1,
                '{"seq":1,"input":{"items":[{"content":"pay ann '
                '10","type":"user_message"}],"kind":"start"},"row":2,"checked":[["budget_exhausted",false],["output_only",false]],"state_after":{"turn":0,"usage":{"input_tokens":0,"output_tokens":0,"total_tokens":0,"requests":0},"phase":"CallingModel"},"next_action":{"request":{"purpose":"turn","tools":true,"response_format":null,"prompt":null,"repair_errors":[]},"kind":"call_model"},"events":[{"turn":0,"type":"turn_started"}],"appends":[{"content":"pay '
                'ann 10","type":"user_message"}]}',
                "5b51630d513eb2f6737ef14a3c3dc07eb9ac5de1960badf916661b79361ae42a",
            ),
            (
                "r1",
                2,
                '{"seq":2,"input":{"items":[{"call_id":"t1","name":"transfer","arguments":"{\\"to\\": '
                '\\"ann\\", \\"amount\\": '
                '10}","type":"tool_call"}],"usage":{"input_tokens":0,"output_tokens":0,"total_tokens":0,"requests":1},"finish_reason":"tool_calls","kind":"model_response"},"row":7,"checked":[["truncated",false],["empty",false],["duplicate_call_ids",false],["has_handoff",false],["needs_approval",true]],"state_after":{"pending":[{"call":{"call_id":"t1","name":"transfer","arguments":"{\\"to\\": '
                '\\"ann\\", \\"amount\\": '
                '10}","type":"tool_call"},"arguments_hash":"9f833feb19675f77564799eba4842f5c8b7987e0173721000ba9420971012f29","run_id":"","seq":0}],"allowed":[],"turn":0,"usage":{"input_tokens":0,"output_tokens":0,"total_tokens":0,"requests":1},"calls":[{"call_id":"t1","name":"transfer","arguments":"{\\"to\\": '
                '\\"ann\\", \\"amount\\": '
                '10}","type":"tool_call"}],"settled":[],"context_tokens":0,"phase":"NeedsApproval"},"next_action":{"pending":[{"call":{"call_id":"t1","name":"transfer","arguments":"{\\"to\\": '
                '\\"ann\\", \\"amount\\": '
                '10}","type":"tool_call"},"arguments_hash":"9f833feb19675f77564799eba4842f5c8b7987e0173721000ba9420971012f29","run_id":"","seq":0}],"kind":"await_approval"},"events":[{"item":{"call_id":"t1","name":"transfer","arguments":"{\\"to\\": '
                '\\"ann\\", \\"amount\\": '
                '10}","type":"tool_call"},"type":"tool_call_item"},{"call_id":"t1","tool":"transfer","args":"{\\"to\\": '
                '\\"ann\\", \\"amount\\": '
                '10}","arguments_hash":"9f833feb19675f77564799eba4842f5c8b7987e0173721000ba9420971012f29","type":"approval_requested"}],"appends":[{"call_id":"t1","name":"transfer","arguments":"{\\"to\\": '
                '\\"ann\\", \\"amount\\": 10}","type":"tool_call"}]}',
                "8c2723ebd633471f302c15851fcace0d6d5e8e0fb8c5832f3a5ea4f8c4eba704",
            ),
            (
                "r2",
                1,
                '{"seq":1,"input":{"items":[{"content":"pay bob '
                '20","type":"user_message"}],"kind":"start"},"row":2,"checked":[["budget_exhausted",false],["output_only",false]],"state_after":{"turn":0,"usage":{"input_tokens":0,"output_tokens":0,"total_tokens":0,"requests":0},"phase":"CallingModel"},"next_action":{"request":{"purpose":"turn","tools":true,"response_format":null,"prompt":null,"repair_errors":[]},"kind":"call_model"},"events":[{"turn":0,"type":"turn_started"}],"appends":[{"content":"pay '
                'bob 20","type":"user_message"}]}',
                "3073927c5315fb408d679404cc3da064607ee435449161c79e2f8bc38a902045",
            ),
            (
                "r2",
                2,
                '{"seq":2,"input":{"items":[{"call_id":"t1","name":"transfer","arguments":"{\\"to\\": '
                '\\"ann\\", \\"amount\\": '
                '10}","type":"tool_call"}],"usage":{"input_tokens":0,"output_tokens":0,"total_tokens":0,"requests":1},"finish_reason":"tool_calls","kind":"model_response"},"row":7,"checked":[["truncated",false],["empty",false],["duplicate_call_ids",false],["has_handoff",false],["needs_approval",true]],"state_after":{"pending":[{"call":{"call_id":"t1","name":"transfer","arguments":"{\\"to\\": '
                '\\"ann\\", \\"amount\\": '
                '10}","type":"tool_call"},"arguments_hash":"9f833feb19675f77564799eba4842f5c8b7987e0173721000ba9420971012f29","run_id":"","seq":0}],"allowed":[],"turn":0,"usage":{"input_tokens":0,"output_tokens":0,"total_tokens":0,"requests":1},"calls":[{"call_id":"t1","name":"transfer","arguments":"{\\"to\\": '
                '\\"ann\\", \\"amount\\": '
                '10}","type":"tool_call"}],"settled":[],"context_tokens":0,"phase":"NeedsApproval"},"next_action":{"pending":[{"call":{"call_id":"t1","name":"transfer","arguments":"{\\"to\\": '
                '\\"ann\\", \\"amount\\": '
                '10}","type":"tool_call"},"arguments_hash":"9f833feb19675f77564799eba4842f5c8b7987e0173721000ba9420971012f29","run_id":"","seq":0}],"kind":"await_approval"},"events":[{"item":{"call_id":"t1","name":"transfer","arguments":"{\\"to\\": '
                '\\"ann\\", \\"amount\\": '
                '10}","type":"tool_call"},"type":"tool_call_item"},{"call_id":"t1","tool":"transfer","args":"{\\"to\\": '
                '\\"ann\\", \\"amount\\": '
                '10}","arguments_hash":"9f833feb19675f77564799eba4842f5c8b7987e0173721000ba9420971012f29","type":"approval_requested"}],"appends":[{"call_id":"t1","name":"transfer","arguments":"{\\"to\\": '
                '\\"ann\\", \\"amount\\": 10}","type":"tool_call"}]}',
                "949972815d587ca902e973fde3310135e6b55388a3b8a41687fbeb044c3c448e",
            ),
            (
                "r2",
                3,
                '{"seq":3,"input":{"decisions":[{"call_id":"t1","arguments_hash":"9f833feb19675f77564799eba4842f5c8b7987e0173721000ba9420971012f29","approved":true,"reason":"","run_id":"r2","seq":2}],"kind":"approval_decisions"},"row":19,"checked":[["all_decided",true]],"state_after":{"calls":[{"call_id":"t1","name":"transfer","arguments":"{\\"to\\": '
                '\\"ann\\", \\"amount\\": '
                '10}","type":"tool_call"}],"turn":0,"usage":{"input_tokens":0,"output_tokens":0,"total_tokens":0,"requests":1},"settled":[],"context_tokens":0,"phase":"ExecutingTools"},"next_action":{"calls":[{"call_id":"t1","name":"transfer","arguments":"{\\"to\\": '
                '\\"ann\\", \\"amount\\": '
                '10}","type":"tool_call"}],"kind":"execute_tools"},"events":[],"appends":[]}',
                "854d419ea92cb71d64b16ab4a51fc22a2953968255762fd1a96637cfc645404d",
            ),
            (
                "r2",
                4,
                '{"seq":4,"input":{"results":[{"call_id":"t1","content":"sent 10 to '
                'ann","is_error":false,"status":"executed","type":"tool_result"}],"usage":{"input_tokens":0,"output_tokens":0,"total_tokens":0,"requests":0},"kind":"tool_results"},"row":16,"checked":[["turn_limit_reached",false],["over_context_budget",false],["budget_exhausted",false]],"state_after":{"turn":1,"usage":{"input_tokens":0,"output_tokens":0,"total_tokens":0,"requests":1},"phase":"CallingModel"},"next_action":{"request":{"purpose":"turn","tools":true,"response_format":null,"prompt":null,"repair_errors":[]},"kind":"call_model"},"events":[{"item":{"call_id":"t1","content":"sent '
                "10 to "
                'ann","is_error":false,"status":"executed","type":"tool_result"},"type":"tool_output_item"},{"turn":1,"type":"turn_started"}],"appends":[{"call_id":"t1","content":"sent '
                '10 to ann","is_error":false,"status":"executed","type":"tool_result"}]}',
                "21c62303553e029ed124a28ce6535549f93c46e816d841382b74161aebc62ada",
            ),
            (
                "r2",
                5,
                '{"seq":5,"input":{"items":[{"content":"Sent.","agent":"teller","type":"assistant_message"}],"usage":{"input_tokens":0,"output_tokens":0,"total_tokens":0,"requests":1},"finish_reason":"stop","kind":"model_response"},"row":10,"checked":[["truncated",false],["empty",false],["duplicate_call_ids",false],["has_handoff",false],["needs_approval",false],["has_tool_calls",false],["has_output_type",false]],"state_after":{"output":{"text":"Sent.","value":null,"usage":{"input_tokens":0,"output_tokens":0,"total_tokens":0,"requests":2}},"phase":"Done"},"next_action":{"kind":"terminate"},"events":[{"item":{"content":"Sent.","agent":"teller","type":"assistant_message"},"type":"message_output"},{"output":{"text":"Sent.","value":null,"usage":{"input_tokens":0,"output_tokens":0,"total_tokens":0,"requests":2}},"usage":{"input_tokens":0,"output_tokens":0,"total_tokens":0,"requests":2},"type":"run_completed"}],"appends":[{"content":"Sent.","agent":"teller","type":"assistant_message"}]}',
                "a8b27f90c3631ed8156c3eac3d0be71fa7c0060218080b1d042a2563dd14dad6",
            ),
        ],
    ),
    "runs": (
        (
            "run_id",
            "header",
            "header_mac",
            "agent",
            "parent_run_id",
            "session_id",
            "status",
            "phase",
            "head_seq",
            "head_mac",
            "turns",
            "lease_owner",
            "lease_epoch",
            "lease_expires",
            "created_at",
            "updated_at",
            "forked_from",
            "forked_at",
            "head_sig",
        ),
        [
            (
                "r1",
                '{"run_id":"r1","agent":"teller","chart":"AgentLoopChart","chart_digest":"a15a890f46b8db54dcc30c6ee1ef999b0043416dd10967089e9a5b426babbb53","toolset_digest":"95280a74b75bf0d815c105d8ba151962313c7c49294b93a68f5d93136a1d86b7","parent_run_id":null,"session_id":null,"session_items":0,"format_version":1,"forked_from":null,"forked_at":null,"tools":[]}',
                "90f7ed4a325c436f6ce031356609d2818dd983fa87777da05b3b00b46ad057ad",
                "teller",
                None,
                None,
                "suspended",
                "NeedsApproval",
                2,
                "8c2723ebd633471f302c15851fcace0d6d5e8e0fb8c5832f3a5ea4f8c4eba704",
                1,
                None,
                1,
                None,
                1796178736.9935873,
                1796178737.0806222,
                None,
                None,
                "c07ab17b56568e93882d107166770b6174381e95172960cd718a946f2452ec00",
            ),
            (
                "r2",
                '{"run_id":"r2","agent":"teller","chart":"AgentLoopChart","chart_digest":"a15a890f46b8db54dcc30c6ee1ef999b0043416dd10967089e9a5b426babbb53","toolset_digest":"95280a74b75bf0d815c105d8ba151962313c7c49294b93a68f5d93136a1d86b7","parent_run_id":null,"session_id":null,"session_items":0,"format_version":1,"forked_from":null,"forked_at":null,"tools":[]}',
                "9cc3f315c8495e71d4b610dec9aa6cbc7e8048eca2fee3e8958416a11d3f38ed",
                "teller",
                None,
                None,
                "completed",
                "Done",
                5,
                "a8b27f90c3631ed8156c3eac3d0be71fa7c0060218080b1d042a2563dd14dad6",
                2,
                None,
                2,
                None,
                1796178737.122119,
                1796178737.5574086,
                None,
                None,
                "e287d496c7169dd30e519d3c20995837935cd92911294afb2fc4602cbc1f8f75",
            ),
        ],
    ),
    "sessions": (
        ("session_id", "n", "item", "mac", "run_id", "created_at"),
        [
            (
                "s",
                1,
                '{"content":"what do I need?","type":"user_message"}',
                "869f8337dfb4ba6913f356e2f98ff099ce8893ffc76ce07653ace6ee11d568c5",
                "r1",
                1796178737.5576358,
            ),
            (
                "s",
                2,
                '{"content":"milk","agent":null,"type":"assistant_message"}',
                "3074345490c1ff07883a0d82c17c28a5b2abf64bfac4c213d5cceea628e5d50a",
                "r1",
                1796178737.5576358,
            ),
            (
                "s",
                3,
                '{"content":"and?","type":"user_message"}',
                "2ed4e809c861d5e616f072f05b36111853f5ec81cd6a4252256db0c993183a85",
                "r2",
                1796178737.5682695,
            ),
        ],
    ),
}


OLD = {"sqlite": 3, "postgres": 1}
"""The schema version of format 1 on each backend."""


def load_format1(backend: Backend, version: int | None = None) -> None:
    """Make `backend`'s database the store of format 1, at its schema `version`."""
    old = OLD[backend.name] if version is None else version
    migrations = postgres_sql if isinstance(backend, PostgresBackend) else sqlite_sql
    backend.sql("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    for step in migrations.MIGRATIONS[:old]:
        for statement in step.split(";"):
            if statement.strip():
                backend.sql(statement)
    keys = {run[0]: n for n, run in enumerate(TABLES["runs"][1], start=1)}
    for table, (columns, rows) in TABLES.items():
        for row in rows:
            backend.sql(*_insert(table, columns, row, keys if old >= 3 else None))
    backend.sql("INSERT INTO meta (key, value) VALUES ('schema', ?)", str(old))


def _insert(
    table: str, columns: tuple[str, ...], row: tuple[Any, ...], keys: dict[str, int] | None
) -> tuple[Any, ...]:
    """An INSERT of `row`; with `keys` (SQLite's schema 3), the run's number and the
    record's key made as that schema makes them."""
    if keys is not None and table == "runs":
        columns, row = (*columns, "run_key"), (*row, keys[row[0]])
    if keys is not None and table == "records":
        columns, row = (*columns, "id"), (*row, keys[row[0]] * sqlite_sql.RUN_SPAN + row[1])
    marks = ", ".join("?" for _ in columns)
    return (f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})", *row)
