"""Tenants moving between the Pulumi stacks of a sharded environment: which stacks a change touches
(`stack_changes`) and the state moves planned from what the stacks hold (`state_moves`)."""
