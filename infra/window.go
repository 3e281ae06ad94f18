package main

import (
	"fmt"
	"regexp"
	"strconv"
)

// windowRE is a weekly window as ElastiCache and RDS write it:
// ddd:hh24:mi-ddd:hh24:mi, in UTC.
var windowRE = regexp.MustCompile(`^(mon|tue|wed|thu|fri|sat|sun):([01][0-9]|2[0-3]):([0-5][0-9])-(mon|tue|wed|thu|fri|sat|sun):([01][0-9]|2[0-3]):([0-5][0-9])$`)

var weekdays = map[string]int{"mon": 0, "tue": 1, "wed": 2, "thu": 3, "fri": 4, "sat": 5, "sun": 6}

const week = 7 * 24 * 60 // minutes

// checkWindow says what is wrong with a MaintenanceWindow: its format, a
// length outside ElastiCache's 60 minutes to 24 hours (RDS asks for 30
// minutes at least), or an overlap with Aurora's daily backup window
// (backupWindow), which RDS refuses at deploy.
func checkWindow(w string) error {
	m := windowRE.FindStringSubmatch(w)
	if m == nil {
		return fmt.Errorf("MaintenanceWindow (maintenanceWindow) %q: want ddd:hh:mm-ddd:hh:mm in UTC, such as %s", w, defaultMaintenanceWindow)
	}
	at := func(day, h, mi string) int {
		hh, _ := strconv.Atoi(h)
		mm, _ := strconv.Atoi(mi)
		return weekdays[day]*24*60 + hh*60 + mm
	}
	start, end := at(m[1], m[2], m[3]), at(m[4], m[5], m[6])
	length := (end - start + week) % week
	if length < 60 || length > 24*60 {
		return fmt.Errorf("MaintenanceWindow (maintenanceWindow) %q lasts %d minutes: want 60 to 1440", w, length)
	}
	// The backup window, 01:00-01:30 every day.
	// They overlap when the window holds the backup's first or last
	// minute, or starts within the backup.
	for d := range 7 {
		b := d*24*60 + 60
		if (b-start+week)%week < length || (b+29-start+week)%week < length || (start-b+week)%week < 30 {
			return fmt.Errorf("MaintenanceWindow (maintenanceWindow) %q overlaps Aurora's daily backup window %s UTC: RDS refuses that; choose another hour", w, backupWindow)
		}
	}
	return nil
}
