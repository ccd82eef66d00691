policy "1st" {
  rank = "first_fit"
}
