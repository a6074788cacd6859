"""The domains procedural tasks are drawn from: one row of data per schema, no code per domain.

Every domain has the same shape of roles, so every question template works on
every domain: a fact table (one row per ``entity``) with an id, a date, two
categorical columns (``g1``, ``g2``), two measures (``m1``, ``m2``) and a key
into a dimension table that carries one more categorical attribute (``attr``).
What differs is the vocabulary, the units and the value distributions, which
is what makes a schema a different problem to read. Category values avoid the
strings pandas reads as missing (``NA``, ``None``, ``null``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Measure:
    """A numeric column: name, unit word for questions, distribution and decimals kept."""

    name: str
    unit: str
    dist: tuple  # ("lognormal", mu, sigma) | ("normal", mean, sd) | ("uniform", lo, hi) | ("poisson", lam)
    decimals: int


@dataclass(frozen=True)
class Domain:
    """One schema: table and column names, category pools, measures and the dimension table."""

    name: str
    table: str
    entity: str
    id_col: str
    date_col: str
    g1: tuple[str, tuple[str, ...]]
    g2: tuple[str, tuple[str, ...]]
    m1: Measure
    m2: Measure
    dim_table: str
    key: str
    key_prefix: str
    attr: tuple[str, tuple[str, ...]]


def _d(name, table, entity, id_col, date_col, g1, g2, m1, m2, dim, key, prefix, attr) -> Domain:
    return Domain(name, table, entity, id_col, date_col, g1, g2, Measure(*m1), Measure(*m2), dim, key,
                  prefix, attr)


REGIONS = ("North", "South", "East", "West", "Central")
TIERS = ("Bronze", "Silver", "Gold", "Platinum")

DOMAINS: tuple[Domain, ...] = (
    _d("sales", "orders", "order", "order_id", "order_date",
       ("region", REGIONS), ("channel", ("Online", "Retail", "Partner", "Phone")),
       ("amount", "dollars", ("lognormal", 4.5, 0.6), 2), ("units", "units", ("poisson", 6), 0),
       "customers", "customer_id", "C", ("segment", ("Consumer", "Corporate", "Small Business"))),
    _d("hr", "payroll", "payment", "payment_id", "pay_date",
       ("department", ("Engineering", "Sales", "Finance", "Support", "Legal", "Marketing")),
       ("grade", ("Junior", "Mid", "Senior", "Lead")),
       ("gross_pay", "dollars", ("normal", 5200, 1400), 2), ("overtime_hours", "hours", ("poisson", 7), 0),
       "employees", "employee_id", "E", ("location", ("Austin", "Boston", "Denver", "Seattle"))),
    _d("logistics", "shipments", "shipment", "shipment_id", "ship_date",
       ("carrier", ("FastFreight", "BlueLine", "CargoMax", "ShipRight")),
       ("service", ("Ground", "Express", "Overnight")),
       ("weight_kg", "kilograms", ("lognormal", 2.8, 0.7), 2), ("transit_days", "days", ("poisson", 4), 0),
       "warehouses", "warehouse_id", "W", ("country", ("Germany", "France", "Spain", "Poland", "Italy"))),
    _d("claims", "claims", "claim", "claim_id", "service_date",
       ("specialty", ("Cardiology", "Oncology", "Pediatrics", "Orthopedics", "Dermatology")),
       ("claim_status", ("Approved", "Denied", "Pending")),
       ("billed_amount", "dollars", ("lognormal", 6.5, 0.8), 2), ("procedures", "procedures", ("poisson", 3), 0),
       "patients", "patient_id", "P", ("plan", ("HMO", "PPO", "EPO", "Medicare"))),
    _d("web", "sessions", "session", "session_id", "visit_date",
       ("source", ("Search", "Social", "Email", "Direct", "Referral")),
       ("device", ("Desktop", "Mobile", "Tablet")),
       ("duration_s", "seconds", ("lognormal", 5.0, 0.9), 1), ("pageviews", "pages", ("poisson", 5), 0),
       "visitors", "visitor_id", "V", ("country", ("US", "UK", "Canada", "India", "Brazil"))),
    _d("ledger", "entries", "entry", "entry_id", "posting_date",
       ("account", ("Revenue", "Payroll", "Rent", "Travel", "Supplies", "Utilities")),
       ("entity_code", ("EU01", "US02", "AP03")),
       ("debit", "dollars", ("lognormal", 7.0, 1.0), 2), ("line_items", "lines", ("poisson", 4), 0),
       "cost_centers", "center_id", "K", ("owner", ("Ops", "Corporate", "Field"))),
    _d("iot", "readings", "reading", "reading_id", "reading_date",
       ("site", ("Plant A", "Plant B", "Plant C", "Depot", "Lab")),
       ("sensor_type", ("Thermal", "Pressure", "Vibration")),
       ("value", "units", ("normal", 72, 9), 2), ("alarms", "alarms", ("poisson", 1.5), 0),
       "devices", "device_id", "D", ("vendor", ("Acme", "Sensa", "Vektor", "Omni"))),
    _d("education", "grades", "grade record", "record_id", "exam_date",
       ("subject", ("Math", "Physics", "History", "Biology", "Literature")),
       ("term", ("Fall", "Spring", "Summer")),
       ("score", "points", ("normal", 71, 12), 1), ("absences", "days", ("poisson", 3), 0),
       "students", "student_id", "S", ("school", ("Oakwood", "Riverside", "Hillcrest", "Lakeview"))),
    _d("energy", "meter_reads", "meter read", "read_id", "read_date",
       ("tariff", ("Standard", "Economy", "Green", "Business")),
       ("supply", ("Electric", "Gas")),
       ("kwh", "kilowatt-hours", ("lognormal", 5.8, 0.5), 1), ("outages", "outages", ("poisson", 0.8), 0),
       "premises", "premise_id", "M", ("city", ("Leeds", "Bristol", "Glasgow", "Cardiff"))),
    _d("marketing", "campaign_events", "campaign event", "event_id", "event_date",
       ("campaign", ("Spring Sale", "Back to School", "Holiday Push", "Brand Lift", "Launch")),
       ("medium", ("Display", "Video", "Search", "Email")),
       ("spend", "dollars", ("lognormal", 6.0, 0.7), 2), ("clicks", "clicks", ("poisson", 40), 0),
       "audiences", "audience_id", "A", ("age_band", ("18-24", "25-34", "35-44", "45-64"))),
    _d("retail_inventory", "stock_moves", "stock movement", "move_id", "move_date",
       ("category", ("Grocery", "Apparel", "Electronics", "Home", "Toys")),
       ("move_type", ("Receipt", "Transfer", "Return")),
       ("unit_cost", "dollars", ("lognormal", 3.2, 0.6), 2), ("quantity", "units", ("poisson", 20), 0),
       "stores", "store_id", "R", ("format", ("Mall", "Street", "Outlet"))),
    _d("airline", "bookings", "booking", "booking_id", "travel_date",
       ("route", ("NYC-LAX", "SFO-SEA", "BOS-MIA", "ORD-DFW", "ATL-DEN")),
       ("cabin", ("Economy", "Premium", "Business")),
       ("fare", "dollars", ("lognormal", 5.6, 0.5), 2), ("bags", "bags", ("poisson", 1.2), 0),
       "passengers", "passenger_id", "F", ("loyalty", TIERS)),
    _d("hotel", "stays", "stay", "stay_id", "checkin_date",
       ("property", ("Harbor Inn", "City Suites", "Alpine Lodge", "Beach Resort")),
       ("room_type", ("Single", "Double", "Suite")),
       ("room_revenue", "dollars", ("lognormal", 5.5, 0.6), 2), ("nights", "nights", ("poisson", 3), 0),
       "guests", "guest_id", "G", ("membership", TIERS)),
    _d("restaurant", "tickets", "ticket", "ticket_id", "service_date",
       ("branch", ("Downtown", "Uptown", "Airport", "Suburb")),
       ("meal", ("Breakfast", "Lunch", "Dinner")),
       ("bill", "dollars", ("lognormal", 3.6, 0.5), 2), ("covers", "covers", ("poisson", 3), 0),
       "servers", "server_id", "T", ("shift", ("Morning", "Evening", "Night"))),
    _d("banking", "transactions", "transaction", "txn_id", "txn_date",
       ("merchant_type", ("Grocery", "Fuel", "Travel", "Dining", "Utilities", "Online")),
       ("txn_channel", ("Card", "Transfer", "ATM")),
       ("txn_amount", "dollars", ("lognormal", 3.9, 0.9), 2), ("items", "items", ("poisson", 2), 0),
       "accounts", "account_id", "B", ("product", ("Checking", "Savings", "Credit"))),
    _d("insurance", "policies", "policy", "policy_id", "start_date",
       ("line", ("Auto", "Home", "Life", "Travel")),
       ("policy_channel", ("Broker", "Direct", "Bank")),
       ("premium", "dollars", ("lognormal", 6.8, 0.4), 2), ("riders", "riders", ("poisson", 1.5), 0),
       "agents", "agent_id", "N", ("agency", ("Northstar", "Keystone", "Bluewater"))),
    _d("telecom", "usage", "usage record", "usage_id", "usage_date",
       ("plan_name", ("Basic", "Plus", "Unlimited", "Family")),
       ("network", ("4G", "5G", "WiFi Call")),
       ("data_gb", "gigabytes", ("lognormal", 1.5, 0.8), 2), ("calls", "calls", ("poisson", 25), 0),
       "subscribers", "subscriber_id", "U", ("region", REGIONS)),
    _d("ecommerce", "cart_events", "cart event", "cart_id", "cart_date",
       ("stage", ("Viewed", "Added", "Checkout", "Purchased")),
       ("platform", ("iOS", "Android", "Web")),
       ("cart_value", "dollars", ("lognormal", 4.2, 0.7), 2), ("cart_items", "items", ("poisson", 3), 0),
       "shoppers", "shopper_id", "H", ("cohort_tier", TIERS)),
    _d("manufacturing", "batches", "batch", "batch_id", "run_date",
       ("line_name", ("Line 1", "Line 2", "Line 3", "Line 4")),
       ("product_code", ("PX-10", "PX-20", "QZ-5", "RT-8")),
       ("yield_pct", "percent", ("uniform", 80, 99.5), 2), ("defects", "defects", ("poisson", 4), 0),
       "operators", "operator_id", "O", ("crew", ("Red", "Blue", "Green"))),
    _d("agriculture", "harvests", "harvest", "harvest_id", "harvest_date",
       ("crop", ("Wheat", "Corn", "Barley", "Soy", "Canola")),
       ("field_zone", ("Upper", "Lower", "River")),
       ("tonnes", "tonnes", ("lognormal", 3.0, 0.5), 2), ("workers", "workers", ("poisson", 8), 0),
       "farms", "farm_id", "Q", ("county", ("Ashby", "Belmont", "Crestwood", "Dunmore"))),
    _d("real_estate", "listings", "listing", "listing_id", "listed_date",
       ("neighborhood", ("Old Town", "Riverside", "Midtown", "Westgate", "Hillside")),
       ("property_type", ("Condo", "House", "Townhouse")),
       ("price", "dollars", ("lognormal", 12.8, 0.4), 0), ("bedrooms", "bedrooms", ("poisson", 3), 0),
       "brokers", "broker_id", "L", ("brokerage", ("Crown", "Summit", "Harbor"))),
    _d("transit", "trips", "trip", "trip_id", "trip_date",
       ("line_code", ("Red Line", "Blue Line", "Green Line", "Orange Line")),
       ("fare_type", ("Adult", "Student", "Senior")),
       ("distance_km", "kilometers", ("lognormal", 2.0, 0.6), 2), ("transfers", "transfers", ("poisson", 1), 0),
       "riders", "rider_id", "Y", ("card_type", ("Monthly", "Pay As You Go", "Annual"))),
    _d("support", "tickets_log", "support ticket", "ticket_no", "opened_date",
       ("queue", ("Billing", "Technical", "Accounts", "Shipping")),
       ("priority", ("Low", "Medium", "High", "Urgent")),
       ("resolution_h", "hours", ("lognormal", 2.5, 0.8), 1), ("replies", "replies", ("poisson", 4), 0),
       "agents_desk", "desk_agent_id", "Z", ("team", ("Alpha", "Bravo", "Charlie"))),
    _d("pharmacy", "dispenses", "dispense", "dispense_id", "fill_date",
       ("drug_class", ("Statin", "Antibiotic", "Analgesic", "Antihistamine", "Insulin")),
       ("payer", ("Private", "Public", "Cash")),
       ("copay", "dollars", ("lognormal", 2.8, 0.6), 2), ("days_supply", "days", ("poisson", 30), 0),
       "prescribers", "prescriber_id", "X", ("practice", ("Clinic East", "Clinic West", "Central Hospital"))),
    _d("sports", "matches", "match record", "match_id", "match_date",
       ("team", ("Falcons", "Tigers", "Sharks", "Wolves", "Bears")),
       ("venue", ("Home", "Away", "Neutral")),
       ("possession_pct", "percent", ("uniform", 30, 70), 1), ("goals", "goals", ("poisson", 1.6), 0),
       "coaches", "coach_id", "J", ("league", ("Premier", "Championship"))),
    _d("library", "loans", "loan", "loan_id", "loan_date",
       ("genre", ("Fiction", "History", "Science", "Children", "Poetry")),
       ("format_type", ("Print", "Ebook", "Audio")),
       ("late_fee", "dollars", ("lognormal", 0.8, 0.7), 2), ("renewals", "renewals", ("poisson", 1), 0),
       "members", "member_id", "I", ("branch_name", ("Central", "Eastside", "Northgate"))),
    _d("construction", "work_orders", "work order", "order_no", "start_date",
       ("trade", ("Electrical", "Plumbing", "Carpentry", "Roofing", "Masonry")),
       ("phase", ("Foundation", "Framing", "Finishing")),
       ("labor_cost", "dollars", ("lognormal", 7.2, 0.6), 2), ("crew_size", "workers", ("poisson", 5), 0),
       "projects", "project_id", "W", ("client_type", ("Residential", "Commercial", "Public"))),
    _d("fleet", "fuel_logs", "fuel log", "log_id", "fill_date",
       ("vehicle_class", ("Van", "Truck", "Sedan", "Bus")),
       ("fuel", ("Diesel", "Petrol", "Electric")),
       ("liters", "liters", ("lognormal", 3.8, 0.4), 2), ("stops", "stops", ("poisson", 6), 0),
       "drivers", "driver_id", "V", ("depot", ("Northfield", "Southport", "Eastvale"))),
    _d("charity", "donations", "donation", "donation_id", "gift_date",
       ("fund", ("Education", "Health", "Environment", "Arts", "Relief")),
       ("gift_method", ("Online", "Check", "Event", "Payroll")),
       ("gift_amount", "dollars", ("lognormal", 4.0, 1.0), 2), ("gift_count", "gifts", ("poisson", 2), 0),
       "donors", "donor_id", "N", ("donor_type", ("Individual", "Foundation", "Corporate"))),
    _d("streaming", "plays", "play", "play_id", "play_date",
       ("genre_name", ("Drama", "Comedy", "Documentary", "Action", "Kids")),
       ("player", ("TV", "Phone", "Laptop", "Console")),
       ("watch_min", "minutes", ("lognormal", 3.6, 0.7), 1), ("episodes", "episodes", ("poisson", 2), 0),
       "profiles", "profile_id", "P", ("subscription", ("Ad Tier", "Standard", "Premium"))),
    _d("water_utility", "service_calls", "service call", "call_id", "call_date",
       ("district", ("Harbor", "Uplands", "Mill Creek", "Old Quarter")),
       ("issue", ("Leak", "Pressure", "Quality", "Meter")),
       ("repair_cost", "dollars", ("lognormal", 5.2, 0.7), 2), ("visits", "visits", ("poisson", 2), 0),
       "crews", "crew_id", "K", ("crew_shift", ("Day", "Night"))),
    _d("clinical_trials", "visits_log", "trial visit", "visit_id", "visit_date",
       ("arm", ("Placebo", "Low Dose", "High Dose")),
       ("trial_site", ("Site 01", "Site 02", "Site 03", "Site 04")),
       ("biomarker", "mg/dL", ("normal", 110, 18), 1), ("adverse_events", "events", ("poisson", 0.7), 0),
       "subjects", "subject_id", "S", ("sex", ("Female", "Male"))),
    _d("gaming", "matches_played", "game session", "game_id", "played_date",
       ("game_mode", ("Ranked", "Casual", "Arcade", "Co-op")),
       ("region_server", ("EU", "US", "Asia")),
       ("score_points", "points", ("lognormal", 7.5, 0.5), 0), ("kills", "kills", ("poisson", 6), 0),
       "players", "player_id", "G", ("rank_tier", TIERS)),
    _d("procurement", "purchase_orders", "purchase order", "po_id", "po_date",
       ("supplier", ("Globex", "Initech", "Umbrella", "Hooli", "Vandelay")),
       ("commodity", ("Steel", "Plastics", "Chemicals", "Packaging")),
       ("po_value", "dollars", ("lognormal", 8.0, 0.7), 2), ("po_lines", "lines", ("poisson", 5), 0),
       "buyers", "buyer_id", "Y", ("division", ("Industrial", "Consumer", "Medical"))),
)

BY_NAME = {d.name: d for d in DOMAINS}
