"""The MCP server: turnback's file tools with checkpoints, for any MCP client."""
