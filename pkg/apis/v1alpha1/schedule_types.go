package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Schedule creates Backups from Template on a cron schedule (server mode).
// Each Backup is named <schedule>-<YYYYMMDDhhmmss> (UTC, the scheduled
// time) and labelled ferry.dev/schedule=<schedule>.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=ferry
// +kubebuilder:printcolumn:name="Schedule",type=string,JSONPath=`.spec.schedule`
// +kubebuilder:printcolumn:name="Paused",type=boolean,JSONPath=`.spec.paused`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Last Backup",type=date,JSONPath=`.status.lastBackup`
// +kubebuilder:printcolumn:name="Next",type=date,JSONPath=`.status.nextBackup`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 166",message="a Schedule name is at most 166 characters: its Backups are named <schedule>-<YYYYMMDDhhmmss>, at most 181"
type Schedule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ScheduleSpec   `json:"spec"`
	Status            ScheduleStatus `json:"status,omitempty"`
}

// ScheduleSpec says when to back up and what.
type ScheduleSpec struct {
	// Schedule is a cron expression in the standard five-field syntax
	// ("*/5 * * * *"), or a descriptor ("@hourly", "@every 1h30m"), as
	// parsed by github.com/robfig/cron/v3's ParseStandard. Times are UTC.
	// An expression that does not parse marks the Schedule FailedValidation.
	// +kubebuilder:validation:MinLength=1
	Schedule string `json:"schedule"`
	// Template is the spec of every Backup the schedule creates.
	// +optional
	Template BackupSpec `json:"template,omitempty"`
	// TTL is set as each created Backup's spec.ttl (overrides template.ttl).
	// +optional
	TTL *metav1.Duration `json:"ttl,omitempty"`
	// Paused stops the schedule from creating Backups; runs missed while
	// paused are not made up.
	// +optional
	Paused bool `json:"paused,omitempty"`
}

// SchedulePhase is the state of a Schedule.
type SchedulePhase string

// Schedule phases.
const (
	SchedulePhaseNew              SchedulePhase = "New"
	SchedulePhaseEnabled          SchedulePhase = "Enabled"
	SchedulePhasePaused           SchedulePhase = "Paused"
	SchedulePhaseFailedValidation SchedulePhase = "FailedValidation"
)

// ScheduleStatus reports a Schedule's state.
type ScheduleStatus struct {
	// +kubebuilder:validation:Enum=New;Enabled;Paused;FailedValidation
	Phase SchedulePhase `json:"phase,omitempty"`
	// LastBackup is the scheduled time of the last Backup created.
	// +optional
	LastBackup *metav1.Time `json:"lastBackup,omitempty"`
	// NextBackup is when the next Backup is due (nil when paused or invalid).
	// +optional
	NextBackup *metav1.Time `json:"nextBackup,omitempty"`
	// ValidationErrors say why the schedule is FailedValidation.
	// +optional
	ValidationErrors []string `json:"validationErrors,omitempty"`
	// Conditions: "Valid" (the cron expression parses).
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ScheduleList is a list of Schedules.
//
// +kubebuilder:object:root=true
type ScheduleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Schedule `json:"items"`
}

// LabelSchedule is set on every Backup a Schedule creates; its value is
// the Schedule's name (cut and hashed past 63 characters, as Velero does).
const LabelSchedule = "ferry.dev/schedule"
