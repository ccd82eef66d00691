policy "tight" {
  on_unschedulable = "retry"
}
