// Package planview renders a reconcile.Plan for people: the terminal view
// (Text) and, for pull-request comments, markdown. It only reads the plan,
// so every rendering says the same thing as the plan's JSON.
package planview
