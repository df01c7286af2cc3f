"""The catalog codes the web page (``static/``) words its own labels with.

``GET /api/v1/messages`` serves these, worded in the request's language; every other text the page shows comes
worded in an API body. tests/web/test_page_words.py checks that this list and the codes the page's files name
are the same.
"""

from __future__ import annotations

PAGE_CODES: tuple[str, ...] = (
    # the product's labels (issue 15 names them exactly), all served although Delete and Revert's confirm come
    # worded as a plan's action
    "label_revert",
    "label_reverted",
    "label_delete",
    "label_revert_and_send",
    "label_keep_files_and_send",
    "label_send_anyway",
    "label_restore_anyway",
    "label_delete_anyway",
    # the marks and words `turnback log` and `show` use, so the page says the same
    "mark_head",
    "mark_abandoned",
    "mark_resent",
    "mark_running",
    "mark_undone",
    "mark_partly_undone",
    "kind_new",
    "kind_modified",
    "kind_deleted",
    "kind_moved",
    "kind_mode",
    "ignored_not_shown",
    "no_input_recorded",
    "no_turns_yet",
    "no_files_changed",
    # the page's own
    "web_page_title",
    "web_sessions",
    "web_no_sessions",
    "web_choose_session",
    "web_history",
    "web_files",
    "web_language",
    "web_turn",
    "web_no_calls",
    "web_tool_edit",
    "web_tool_write",
    "web_tool_command",
    "web_tool_job",
    "web_tool_other",
    "web_state_applied",
    "web_state_cut_short",
    "web_state_evicted",
    "web_state_not_covered",
    "web_state_denied",
    "web_state_failed",
    "web_state_running",
    "web_redo",
    "web_rollback_to",
    "web_roll_back",
    "web_edit_and_resend",
    "web_show_input",
    "web_hide_input",
    "web_unified",
    "web_split",
    "web_cancel",
    "web_close",
    "web_revert_asks",
    "web_delete_asks",
    "web_conflict",
    "web_written_later_by",
    "web_anyway_asks",
    "web_nothing_to_revert",
    "web_rollback_asks",
    "web_turns_leave",
    "web_redo_asks",
    "web_resend_asks",
    "web_stays_as_is",
    "web_disconnected",
    "web_busy",
    "web_working",
    "web_loading",
    "web_added_removed",
    "web_done",
)

__all__ = ["PAGE_CODES"]
