package api

// The clock's wire types join the lists the OpenAPI test checks; they are
// added here, beside their feature, so that the lists grow without edits
// that collide with other features'.
func init() {
	requests = append(requests, ClockAdvance{})
	responses = append(responses, ClockTime{})
}

func init() {
	requests = append(requests, ScheduleConfig{})
	responses = append(responses, Schedule{}, ScheduleList{})
}
